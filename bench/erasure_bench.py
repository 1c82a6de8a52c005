"""Erasure cost (ADR 0077) and what sealing costs (ADR 0073), side by side in one run.

    engram bench erasure [--backend sqlite|postgres] [--database-url URL] [--nodes N] [--other N]
                         [--notes N] [--rebuild-nodes N] [--rounds R] [--items] [--json] [--json-out FILE]

- erasure: `forget being` of a being with N nodes (default 100,000) while another being with
  `--other` nodes (default 10,000) is present, once with every view rebuilt (ADR 0073's way) and
  once with the targeted purge (ADR 0077), each in a fresh deployment built the same way; the
  purge (or rebuild) and the file scrub timed apart;
- sealing: `notes.take` per second (one note a command) with events sealed and in clear, R
  interleaved rounds in one deployment (medians); and a full rebuild of every view, events/s, of a
  log written sealed beside the same log written in clear, R interleaved rounds (medians);
- with --items, instead: `forget note` and `forget subject` in the big being, views rebuilt beside
  the targeted purge of the items' rows (`bench/erasure_items_bench.py`, ADR 0089).

The beings are built as `engram bench patrol` builds its 100k-node beings (`patrol_bench.build`):
aggregates saved in batches through the store, each node created, embedded and cleared of
freshness (three events), vectors random around cluster centres; the views then catch up. Sealing
is switched off by making the mapper find no owner for an event (`shredding._owner`), which stores
it in clear as a log before ADR 0073 did. PostgreSQL needs ENGRAM_TEST_DATABASE_URL (or
ENGRAM_DATABASE_URL, or --database-url); each deployment takes a scratch schema.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from uuid import UUID

import structlog

from bench.audit_log_bench import SCENE, _take  # one note a command, as that bench takes them
from bench.machine import finish, machine_info
from bench.messages_bench import _engram as fresh_engram
from bench.patrol_bench import build
from engram.adapters.eventstore import shredding
from engram.projections import being_rows, engine
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput

DYING_PER_CYCLE = 10.0  # as `engram bench patrol`'s default: a few dying nodes, most alive


def _quiet() -> None:
    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def _url(given: str | None, backend: str) -> str | None:
    if backend != "postgres":
        return None
    url = given or os.environ.get("ENGRAM_TEST_DATABASE_URL") or os.environ.get("ENGRAM_DATABASE_URL")
    if not url:
        raise SystemExit("--backend postgres needs --database-url or ENGRAM_TEST_DATABASE_URL")
    return url


@contextlib.contextmanager
def _in_clear() -> Iterator[None]:
    """Events written meanwhile are stored in clear (no owner found: no key, no seal)."""
    with mock.patch.object(shredding, "_owner", return_value=None):
        yield


def _timed(timers: dict[str, float], part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timers[part] = timers.get(part, 0.0) + time.perf_counter() - started

    return run


def _rows_of(e: Engram, being: UUID) -> int:
    """The being's rows left in every view (0 after an erasure)."""
    n = 0
    for name in e.views.names():
        db, projection = e.views.dbs[name], e.views.projections[name]
        with db.read() as conn:
            tables = engine.read_tables(conn, db, projection)
            for spec in projection.tables:
                column = being_rows.BEING_COLUMNS.get(spec.name)
                if column is not None:
                    found = conn.query_one(
                        f"SELECT count(*) AS n FROM {tables[spec.name]} WHERE {column} = ?",  # noqa: S608
                        [str(being)],
                    )
                    n += int(found["n"]) if found else 0
    return n


def erase(root: Path, url: str | None, nodes: int, other: int, targeted: bool) -> dict[str, Any]:
    """A fresh deployment with two beings, then `forget being` of the big one, timed by part."""
    with fresh_engram(root, url) as e:
        started = time.perf_counter()
        other_id, _, _ = build(e, other, DYING_PER_CYCLE, seed=2)
        being_id, _, _ = build(e, nodes, DYING_PER_CYCLE, seed=1)
        e.views.ensure()
        built_s = time.perf_counter() - started
        events = e.store.log.head()
        other_rows = _rows_of(e, other_id)
        forgetting = e.forgetting
        timers: dict[str, float] = {}
        if targeted:
            assert forgetting.purge is not None
            forgetting.purge.purge_being = _timed(timers, "views", forgetting.purge.purge_being)  # type: ignore[method-assign]
        else:
            forgetting.purge = None
            views = e.views
            views.rebuild_all = _timed(timers, "views", views.rebuild_all)  # type: ignore[method-assign]
        forgetting.storage.scrub = _timed(timers, "scrub", forgetting.storage.scrub)  # type: ignore[method-assign]
        t0 = time.perf_counter()
        done = forgetting.forget_being(f"Bench{nodes}", by="bench")
        total = time.perf_counter() - t0
        e.views.ensure()
        left, kept = _rows_of(e, being_id), _rows_of(e, other_id)
    if left or kept != other_rows:
        raise SystemExit(
            f"erasure left {left} rows of the being, or changed the other's ({other_rows} → {kept})"
        )
    return {
        "strategy": "targeted purge" if targeted else "full rebuild",
        "events": events,
        "build_s": round(built_s, 1),
        "forget_s": round(total, 2),
        "views_s": round(timers.get("views", 0.0), 2),
        "scrub_s": round(timers.get("scrub", 0.0), 2),
        "counts": done.counts,
    }


def ingest(root: Path, url: str | None, notes: int, rounds: int) -> dict[str, Any]:
    """`notes.take` per second, sealed and in clear, interleaved in one deployment."""
    with fresh_engram(root, url) as e:
        e.beings.register("Aria")
        _take(e, 50, "warm")
        sealed, clear = [], []
        for r in range(rounds):
            # Alternate which side goes first: on a machine whose load drifts, the side that always
            # ran second would always get the drift.
            if r % 2:
                with _in_clear():
                    clear.append(_take(e, notes, f"c{r}"))
            sealed.append(_take(e, notes, f"s{r}"))
            if not r % 2:
                with _in_clear():
                    clear.append(_take(e, notes, f"c{r}"))
    s, c = statistics.median(sealed), statistics.median(clear)
    return {
        "notes_per_round": notes,
        "rounds": rounds,
        "sealed_per_s": round(s, 1),
        "clear_per_s": round(c, 1),
        "ratio": round(s / c, 3),
        "sealed_runs": [round(x, 1) for x in sealed],
        "clear_runs": [round(x, 1) for x in clear],
    }


def _filled(root: Path, url: str | None, nodes: int, stack: contextlib.ExitStack) -> Engram:
    e = stack.enter_context(fresh_engram(root, url))
    build(e, nodes, DYING_PER_CYCLE, seed=3)
    batch = [NoteInput(text=json.dumps({**SCENE, "action": f"note {i}"})) for i in range(500)]
    for _ in range(max(1, nodes // 2000)):
        e.notes.take_many(f"Bench{nodes}", batch)
    e.views.ensure()
    return e


def rebuild(root: Path, url: str | None, nodes: int, rounds: int) -> dict[str, Any]:
    """Events/s of a rebuild of every view, of a sealed log and of the same log in clear."""
    with contextlib.ExitStack() as stack:
        sealed_e = _filled(root / "sealed", url, nodes, stack)
        with _in_clear():
            clear_e = _filled(root / "clear", url, nodes, stack)
        events = sealed_e.store.log.head()
        sealed: list[float] = []
        clear: list[float] = []
        for _ in range(rounds):
            for e, out in ((sealed_e, sealed), (clear_e, clear)):
                t0 = time.perf_counter()
                e.views.rebuild_all()
                out.append(e.store.log.head() / (time.perf_counter() - t0))
    s, c = statistics.median(sealed), statistics.median(clear)
    return {
        "events": events,
        "rounds": rounds,
        "sealed_events_per_s": round(s),
        "clear_events_per_s": round(c),
        "ratio": round(s / c, 3),
        "sealed_runs": [round(x) for x in sealed],
        "clear_runs": [round(x) for x in clear],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    url = _url(args.database_url, args.backend)
    result: dict[str, Any] = {
        "bench": "erasure",
        "backend": args.backend,
        "machine": machine_info(),
        "nodes": args.nodes,
        "other_nodes": args.other,
    }
    with tempfile.TemporaryDirectory(prefix="engram-bench-erasure-") as tmp:
        root = Path(tmp)
        if args.items:  # one note and one subject forgotten instead (ADR 0089)
            from bench.erasure_items_bench import erase_items

            return {**result, "bench": "erasure-items", **erase_items(root, url, args.nodes, args.other)}
        runs = [erase(root / "full", url, args.nodes, args.other, targeted=False)]
        runs.append(erase(root / "targeted", url, args.nodes, args.other, targeted=True))
        result["erasure"] = runs
        result["speedup"] = round(runs[0]["forget_s"] / runs[1]["forget_s"], 1)
        result["ingest"] = ingest(root / "ingest", url, args.notes, args.rounds)
        result["rebuild"] = rebuild(root / "rebuild", url, args.rebuild_nodes, args.rounds)
    return result


def _print(r: dict[str, Any]) -> None:
    print(f"erasure, {r['backend']}: a being of {r['nodes']:,} nodes beside one of {r['other_nodes']:,}")
    for e in r["erasure"]:
        print(
            f"  {e['strategy']:>15}: forget {e['forget_s']} s (views {e['views_s']} s, scrub {e['scrub_s']} s), "
            f"log of {e['events']:,} events"
        )
    print(f"  speed-up {r['speedup']}x")
    i, b = r["ingest"], r["rebuild"]
    print(f"ingest notes/s sealed {i['sealed_per_s']} / clear {i['clear_per_s']} = {i['ratio']}")
    print(
        f"rebuild events/s sealed {b['sealed_events_per_s']} / clear {b['clear_events_per_s']} = {b['ratio']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL (implies --backend postgres)")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--other", type=int, default=10_000)
    parser.add_argument("--notes", type=int, default=300, help="notes per ingest round")
    parser.add_argument("--rebuild-nodes", type=int, default=10_000, help="nodes of the rebuilt log")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--items", action="store_true", help="forget one note and one subject instead of the being"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.database_url:
        args.backend = "postgres"
    _quiet()
    result = run(args)
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.items:
        from bench.erasure_items_bench import print_items

        print_items(result)
    else:
        _print(result)


if __name__ == "__main__":
    main()
