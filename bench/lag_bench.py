"""Projection lag under a sustained write load, with `engram worker`'s loop (`services.worker.Worker`).

    engram bench lag [--rates 200 500 1000] [--duration 10] [--database-url …] [--json]

For each rate, on a fresh deployment: one thread writes notes at that rate (one transaction every
10 ms holding rate/100 notes, through `NoteCommands.take_many`), while a Worker runs every projection
as `engram worker` does (SQLite: polling every ENGRAM_WORKER_POLL_INTERVAL_S; PostgreSQL: LISTEN/NOTIFY
plus its safety pull). Two measures per view:

- lag in events: head − position, sampled every 100 ms;
- lag in ms: from a write's commit to the first moment the view's committed position covers it
  (timed where the worker's batch returns, so exact to a batch, not to the 100 ms sampling).

Prints p50 / p95 / max of both, per view and rate, with the rate actually achieved.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench.machine import finish, machine_info
from engram.adapters.logging import configure_logging
from engram.projections import engine
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.worker import Worker

TICK_S = 0.010
SAMPLE_S = 0.100


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"p50": at(0.50), "p95": at(0.95), "max": ordered[-1]}


class Reached:
    """When each view's committed position advanced: recorded where the worker's batch returns."""

    def __init__(self, e: Engram) -> None:
        self.e = e
        self.lock = threading.Lock()
        self.by_view: dict[str, tuple[list[int], list[float]]] = {}
        self._original = engine.process

    def process(self, db: Any, projection: Any, source: Any, **kw: Any) -> int:
        count = self._original(db, projection, source, **kw)
        done = time.monotonic()
        position = engine.status(db, projection).position  # only this worker thread moves it
        with self.lock:
            positions, times = self.by_view.setdefault(projection.name, ([], []))
            if not positions or position > positions[-1]:
                positions.append(position)
                times.append(done)
        return count

    def first_at_or_after(self, view: str, position: int) -> float | None:
        positions, times = self.by_view.get(view, ([], []))
        i = bisect.bisect_left(positions, position)
        return times[i] if i < len(times) else None

    @contextmanager
    def installed(self) -> Iterator[None]:
        engine.process = self.process
        try:
            yield
        finally:
            engine.process = self._original


@contextmanager
def deployment(args: argparse.Namespace) -> Iterator[Engram]:
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-lag-"))
    base: dict[str, Any] = {"data_dir": tmp / "data", "embedder": "hashing", "llm": "none"}
    schema = None
    if args.database_url:
        import psycopg

        schema = "benchlag_" + uuid.uuid4().hex[:10]
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in args.database_url else "?"
        base["database_url"] = f"{args.database_url}{sep}{urlencode({'schema': schema})}"
    e = bootstrap(Settings(**base))
    try:
        yield e
    finally:
        e.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(args.database_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_rate(args: argparse.Namespace, rate: int) -> dict[str, Any]:
    with deployment(args) as e:
        e.beings.register("Aria")
        views = e.views
        views.ensure()
        names = views.names()
        listen = e.listener()
        if listen is not None:
            worker = Worker(views, poll_interval=5.0, listen=listen)  # as `engram worker` on PostgreSQL
            wakeup = "LISTEN/NOTIFY + safety pull"
        else:
            worker = Worker(views, poll_interval=e.settings.worker_poll_interval_s)
            wakeup = f"polling every {e.settings.worker_poll_interval_s} s"
        reached = Reached(e)
        commits: list[tuple[int, float]] = []
        samples: dict[str, list[int]] = {n: [] for n in names}
        stop_sampling = threading.Event()
        per_tick = max(1, round(rate * TICK_S))

        def sample() -> None:
            while not stop_sampling.wait(SAMPLE_S):
                head = e.store.head()
                for n in names:
                    samples[n].append(
                        max(0, head - engine.status(views.dbs[n], views.projections[n]).position)
                    )

        sampler = threading.Thread(target=sample, name="sampler")
        with reached.installed():
            worker.start()
            try:
                time.sleep(0.3)  # the listener connects
                sampler.start()
                started = time.monotonic()
                ticks = 0
                late = 0.0
                while (now := time.monotonic()) - started < args.duration:
                    due = started + ticks * TICK_S
                    if due > now:
                        time.sleep(due - now)
                    else:
                        late = max(late, now - due)
                    result = e.notes.take_many(
                        "Aria", [NoteInput(kind="todo", text=f"note {ticks}.{i}") for i in range(per_tick)]
                    )
                    assert result.position is not None
                    commits.append((result.position, time.monotonic()))
                    ticks += 1
                elapsed = time.monotonic() - started
                head = e.store.head()
                views.wait_for(head, timeout=120)
            finally:
                stop_sampling.set()
                if sampler.is_alive():
                    sampler.join()
                worker.stop()
        rows = []
        for n in names:
            delays = []
            for position, committed in commits:
                seen = reached.first_at_or_after(n, position)
                if seen is None:
                    continue
                delays.append(max(0.0, seen - committed) * 1000)
            rows.append(
                {
                    "view": n,
                    "lag_events": percentiles([float(x) for x in samples[n]]),
                    "lag_ms": {
                        k: round(v, 1) if v is not None else None for k, v in percentiles(delays).items()
                    },
                    "writes_timed": len(delays),
                    "events_processed": worker.stats[n]["events"],
                    "errors": worker.stats[n]["errors"],
                }
            )
        return {
            "rate_target": rate,
            "notes_written": len(commits) * per_tick,
            "transactions": len(commits),
            "notes_per_transaction": per_tick,
            "rate_achieved": round(len(commits) * per_tick / elapsed, 1),
            "writer_max_late_ms": round(late * 1000, 1),
            "seconds": round(elapsed, 2),
            "wakeup": wakeup,
            "samples_per_view": len(samples[names[0]]) if names else 0,
            "views": rows,
        }


def backend_info(args: argparse.Namespace) -> dict[str, Any]:
    if not args.database_url:
        return {"name": "sqlite", "version": sqlite3.sqlite_version}
    import psycopg

    with psycopg.connect(args.database_url, autocommit=True) as conn:
        info: dict[str, Any] = {"name": "postgres"}
        for setting in ("server_version", "fsync", "synchronous_commit"):
            row = conn.execute(f"SHOW {setting}").fetchone()
            info[setting] = row[0] if row else None
    if info.get("fsync") == "off":
        info["note"] = "fsync=off on this server: commits cost less than on a durable server"
    return info


def print_table(result: dict[str, Any]) -> None:
    m, b = result["machine"], result["backend"]
    print(f"engram projection lag benchmark — {m['summary']}")
    detail = (
        f"{b.get('server_version')}, fsync={b.get('fsync')}, synchronous_commit={b.get('synchronous_commit')}"
        if b["name"] == "postgres"
        else f"{b['version']} (WAL)"
    )
    print(f"backend: {b['name']} {detail}" + (f" — NOTE: {b['note']}" if b.get("note") else ""))
    for r in result["runs"]:
        print()
        print(
            f"target {r['rate_target']} notes/s: achieved {r['rate_achieved']} notes/s over {r['seconds']} s "
            f"({r['transactions']} transactions of {r['notes_per_transaction']}), worker wakes by {r['wakeup']}; "
            f"writer at most {r['writer_max_late_ms']} ms late"
        )
        print(
            f"  {'view':<12} {'lag events p50':>14} {'p95':>6} {'max':>6}   {'lag ms p50':>10} {'p95':>7} "
            f"{'max':>7}  errors"
        )
        for v in r["views"]:
            ev, ms = v["lag_events"], v["lag_ms"]
            print(
                f"  {v['view']:<12} {ev['p50']:>14.0f} {ev['p95']:>6.0f} {ev['max']:>6.0f}   "
                f"{_ms(ms['p50']):>10} {_ms(ms['p95']):>7} {_ms(ms['max']):>7}  {v['errors']}"
            )
    print()
    print("lag events: head − view position, sampled every 100 ms; lag ms: a write's commit to the return of")
    print("the view's batch that covers it (views without note handlers only move their position forward).")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rates", type=int, nargs="+", default=[200, 500, 1000], help="notes per second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of writing per rate")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite in a temp dir)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--json-out",
        "--save",
        dest="json_out",
        type=Path,
        default=None,
        help="also write the JSON to this file",
    )
    args = parser.parse_args()
    configure_logging("warning")
    result: dict[str, Any] = {
        "benchmark": "projection_lag",
        "machine": machine_info(),
        "backend": backend_info(args),
        "runs": [run_rate(args, rate) for rate in args.rates],
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
