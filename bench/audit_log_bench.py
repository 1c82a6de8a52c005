"""The log's hash chain and a being's export/import (ADRs 0069, 0070).

    engram bench audit-log [--backend sqlite|postgres] [--database-url URL] [--events N] [--transfer N] [--notes N]
                           [--json] [--json-out FILE]

- ingest: `notes.take` per second with the chain sealed in each insert's transaction, and with the
  sealing switched off, interleaved rounds (the median of each);
- verify: events per second that `engram verify` recomputes and compares (goal: 50k/s), on a log of
  N events;
- export/import: events per second written to a file and read back into a fresh deployment of the
  same backend (plan + write), and the views' catch-up after it, apart.

Events are copies of real `Note.Noted` events under new ids, inserted through the recorder in
batches (so the chain is sealed as in production). PostgreSQL needs ENGRAM_TEST_DATABASE_URL (or
ENGRAM_DATABASE_URL); each run takes a scratch schema.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from uuid import uuid4

import structlog
from eventsourcing.persistence import StoredEvent

from bench.machine import finish, machine_info
from bench.messages_bench import _engram as fresh_engram  # one scratch deployment, as that bench opens it
from engram.adapters.eventstore import being_transfer, chain, chain_check
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput

SCENE = {"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}


_URL: dict[str, str] = {}
"""`--database-url`, when given."""


@contextlib.contextmanager
def _deployment(backend: str, root: Path) -> Iterator[Engram]:
    """A fresh deployment: a new directory, and on PostgreSQL a scratch schema."""
    url = None
    if backend == "postgres":
        url = (
            _URL.get("url")
            or os.environ.get("ENGRAM_TEST_DATABASE_URL")
            or os.environ.get("ENGRAM_DATABASE_URL")
        )
        if not url:
            raise SystemExit("--backend postgres needs --database-url or ENGRAM_TEST_DATABASE_URL")
    with fresh_engram(root / uuid4().hex, url) as e:
        yield e


def _take(e: Engram, n: int, tag: str) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        e.notes.take("Aria", NoteInput(text=json.dumps({**SCENE, "action": f"{tag} {i}"})))
    return n / (time.perf_counter() - t0)


def ingest(backend: str, root: Path, notes: int, rounds: int = 5) -> dict[str, Any]:
    """notes.take per second with the chain and without it, interleaved in one deployment."""
    with _deployment(backend, root) as e:
        e.beings.register("Aria")
        _take(e, 50, "warm")
        chained, plain = [], []
        for r in range(rounds):
            chained.append(_take(e, notes, f"c{r}"))
            with (
                mock.patch.object(chain, "seal_sqlite", return_value=0),
                mock.patch.object(chain, "seal_postgres", return_value=0),
            ):
                plain.append(_take(e, notes, f"p{r}"))
    with_chain, without = statistics.median(chained), statistics.median(plain)
    return {
        "notes_per_round": notes,
        "rounds": rounds,
        "with_chain_per_s": round(with_chain, 1),
        "without_chain_per_s": round(without, 1),
        "cost_pct": round(100 * (without - with_chain) / without, 1),
    }


def _fill(e: Engram, events: int) -> None:
    """`events` copies of real Note.Noted events of Aria, inserted in batches through the recorder."""
    e.beings.register("Aria")
    for i in range(20):
        e.notes.take("Aria", NoteInput(text=json.dumps({**SCENE, "action": f"seed {i}"})))
    samples = [ev for _, ev in e.store.log.decoded_events(1, 1000) if type(ev).__name__ == "Noted"]
    mapper = e.store.app.mapper
    batch: list[StoredEvent] = []
    for i in range(events - e.store.log.head()):
        # Sealed for its own id: a sealed state is bound to its event's id and topic (ADR 0073).
        s = samples[i % len(samples)]
        batch.append(mapper.to_stored_event(type(s)(**{**vars(s), "originator_id": uuid4()})))
        if len(batch) == 1000:
            e.store.app.recorder.insert_events(batch)
            batch = []
    if batch:
        e.store.app.recorder.insert_events(batch)


def verify(backend: str, root: Path, events: int) -> dict[str, Any]:
    with _deployment(backend, root) as e:
        _fill(e, events)
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            verdict = chain_check.verify(e.store.app)
            runs.append(verdict.checked / (time.perf_counter() - t0))
        assert verdict.ok
    return {"events": verdict.checked, "events_per_s": round(statistics.median(runs)), "goal_per_s": 50_000}


def transfer(backend: str, root: Path, events: int) -> dict[str, Any]:
    path = root / "aria.jsonl"
    with _deployment(backend, root) as source:
        _fill(source, events)
        from engram.services.beings import resolve_being

        being = resolve_being(source.store, "Aria")
        t0 = time.perf_counter()
        with path.open("w", encoding="utf-8") as f:
            # With its keys, as a move to another deployment is (the log is sealed, ADR 0073).
            keys = being_transfer.key_exporter(source.store.app)
            summary = being_transfer.export_being(source.store.app, being.name, being.id, f, with_keys=keys)
        export_s = time.perf_counter() - t0
    with _deployment(backend, root) as target:
        t0 = time.perf_counter()
        plan = being_transfer.plan_import(target.store.app, path)
        written = being_transfer.apply_import(target.store.app, plan)
        import_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        target.views.catch_up_or_rebuild()
        views_s = time.perf_counter() - t0
    return {
        "events": summary.events,
        "file_mib": round(path.stat().st_size / 2**20, 1),
        "export_per_s": round(summary.events / export_s),
        "import_per_s": round(written / import_s),
        "views_catch_up_s": round(views_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--database-url", default=None, help="PostgreSQL (implies --backend postgres)")
    parser.add_argument("--events", type=int, default=100_000, help="log size for verify")
    parser.add_argument("--transfer", type=int, default=20_000, help="events of the exported being")
    parser.add_argument("--notes", type=int, default=300, help="notes per ingest round")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    # stdout is the result (`engram bench all` reads it): no log line of the commands in it.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    if args.database_url:
        _URL["url"], args.backend = args.database_url, "postgres"
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="engram-audit-bench-") as tmp:
        root = Path(tmp)
        result: dict[str, Any] = {
            "benchmark": "audit_log",
            "backend": args.backend,
            "machine": machine,
            "ingest": ingest(args.backend, root, args.notes),
            "verify": verify(args.backend, root, args.events),
            "transfer": transfer(args.backend, root, args.transfer),
        }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    i, v, t = result["ingest"], result["verify"], result["transfer"]
    print(f"hash chain and export/import on {args.backend} — {machine['summary']}")
    print(
        f"ingest   notes.take/s with chain {i['with_chain_per_s']:,.0f}, without {i['without_chain_per_s']:,.0f} "
        f"(cost {i['cost_pct']}%)"
    )
    print(f"verify   {v['events']:,} events at {v['events_per_s']:,}/s (goal {v['goal_per_s']:,}/s)")
    print(
        f"transfer {t['events']:,} events ({t['file_mib']} MiB): export {t['export_per_s']:,}/s, "
        f"import {t['import_per_s']:,}/s, then views caught up in {t['views_catch_up_s']} s"
    )


if __name__ == "__main__":
    main()
