"""`engram keys seal` throughput (ADR 0095): a log of N events written before encryption (in clear)
or before item keys (every event under the being's key), sealed into today's form.

    engram bench keys-seal [--backend sqlite|postgres] [--database-url URL] [--events N] [--json] [--json-out FILE]

The log holds N copies of real `Note.Noted` events of one being under new ids (one note each, so each
gets an item key of its own, as an upgraded deployment's notes do), inserted through the recorder in
batches (the hash chain sealed as in production). Timed apart: the dry run (a scan that decrypts and
decides, nothing written), the rewrite (keys taken, events sealed, rows updated, the chain hashed
again per batch, of which the re-hashing alone), and the scrub of the files (SQLite VACUUM of the log,
PostgreSQL VACUUM FULL of the events table). PostgreSQL needs ENGRAM_TEST_DATABASE_URL (or
ENGRAM_DATABASE_URL); each run takes a scratch schema.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock
from uuid import uuid4

import structlog
from eventsourcing.persistence import Mapper, StoredEvent

from bench.audit_log_bench import _URL, SCENE, _deployment
from bench.machine import finish, machine_info
from bench.messages_bench import Timers
from engram.adapters.eventstore import chain_check, reseal_statements, resealing, shredding
from engram.adapters.eventstore.key_choice import KeyChoice
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput


def _fill(e: Engram, events: int, form: str) -> None:
    """`events` copies of Aria's real Note.Noted events, stored as an older version stored them."""
    e.beings.register("Aria")
    for i in range(20):
        e.notes.take("Aria", NoteInput(text=json.dumps({**SCENE, "action": f"seed {i}"})))
    samples = [ev for _, ev in e.store.log.decoded_events(1, 1000) if type(ev).__name__ == "Noted"]
    mapper = e.store.app.mapper
    batch: list[StoredEvent] = []
    with mock.patch.object(shredding, "choose_key", lambda topic, oid, being, state: KeyChoice(being, being)):
        for i in range(events - e.store.log.head()):
            s = samples[i % len(samples)]
            event = type(s)(**{**vars(s), "originator_id": uuid4()})
            # In clear: the library's mapper, no cipher (before ADR 0073); else under the being's key.
            stored = (
                Mapper.to_stored_event(mapper, event) if form == "clear" else mapper.to_stored_event(event)
            )
            batch.append(stored)
            if len(batch) == 1000:
                e.store.app.recorder.insert_events(batch)
                batch = []
        if batch:
            e.store.app.recorder.insert_events(batch)


def run(backend: str, root: Path, events: int, form: str) -> dict[str, Any]:
    with _deployment(backend, root) as e:
        _fill(e, events, form)
        service = e.key_sealing
        resealer = service.resealer
        t0 = time.perf_counter()
        planned = service.seal("Aria", by="bench", dry_run=True)
        survey_s = time.perf_counter() - t0
        timers = Timers()
        resealer.reseal = timers.wrap("rewrite", resealer.reseal)  # type: ignore[method-assign]
        resealer.scrub = timers.wrap("scrub", resealer.scrub)  # type: ignore[method-assign]
        sql, pg = reseal_statements.SQLiteTx, reseal_statements.PostgresTx
        with (
            mock.patch.object(sql, "rechain", timers.wrap("rechain", sql.rechain)),
            mock.patch.object(pg, "rechain", timers.wrap("rechain", pg.rechain)),
        ):
            t0 = time.perf_counter()
            done = service.seal("Aria", by="bench")
            total_s = time.perf_counter() - t0
        assert done.counts["events"] == planned.counts["events"], (done.counts, planned.counts)
        t0 = time.perf_counter()
        verdict = chain_check.verify(e.store.app)
        verify_s = time.perf_counter() - t0
        assert verdict.ok, verdict
        head = e.store.log.head()
    sealed = done.counts["events"]
    rewrite_s = timers.seconds.get("rewrite", 0.0)
    return {
        "form": form,
        "log_events": head,
        "sealed": sealed,
        "keys_created": done.counts.get("keys_created", 0),
        "dry_run_s": round(survey_s, 2),
        "seal_s": round(total_s, 2),
        "rewrite_s": round(rewrite_s, 2),
        "rechain_s": round(timers.seconds.get("rechain", 0.0), 2),
        "scrub_s": round(timers.seconds.get("scrub", 0.0), 2),
        "events_per_s": round(sealed / total_s),
        "rewrite_events_per_s": round(sealed / rewrite_s) if rewrite_s else None,
        "verify_after_s": round(verify_s, 2),
        "batch": resealing.BATCH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--database-url", default=None, help="PostgreSQL (implies --backend postgres)")
    parser.add_argument("--events", type=int, default=100_000, help="events in the log")
    parser.add_argument("--forms", default="clear,being-key", help="which old forms, comma-separated")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    if args.database_url:
        _URL["url"], args.backend = args.database_url, "postgres"
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="engram-keys-seal-bench-") as tmp:
        runs = [run(args.backend, Path(tmp), args.events, form) for form in args.forms.split(",")]
    result: dict[str, Any] = {
        "benchmark": "keys_seal",
        "backend": args.backend,
        "events": args.events,
        "machine": machine,
        "runs": runs,
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"keys seal on {args.backend} — {machine['summary']}")
    for r in runs:
        print(
            f"{r['form']:<10} {r['sealed']:,} of {r['log_events']:,} events in {r['seal_s']} s "
            f"({r['events_per_s']:,}/s): rewrite {r['rewrite_s']} s (re-hashing {r['rechain_s']} s), "
            f"scrub {r['scrub_s']} s; dry run {r['dry_run_s']} s; verify after {r['verify_after_s']} s"
        )


if __name__ == "__main__":
    main()
