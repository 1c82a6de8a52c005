"""The expiry sweep of notes at 100k and 1M notes with 1% due, on SQLite or PostgreSQL (ADR 0048).

    engram bench notes-sweep [--sizes 100000,1000000] [--due 1%] [--beings 100]
                             [--database-url postgresql://…] [--json] [--json-out FILE]

Per size: a fresh store with that many notes spread over `--beings` beings, written 2,000 to a
transaction through the public domain and store (`Note.take`, `AggregateStore.save`); `--due` of
them happened three days ago with a TTL of one day (due), the others live 30 days or never expire.
The notes view is caught up (not measured), then one sweep (`Engram.note_expiry.sweep`) records every
expiry, timed; the time to find the due notes alone (every batch's read of the view, nothing
written) is measured before it.

The goal (issue #9): the sweep at 1M within 2× the one at 100k. With a share due, 1M notes hold ten
times the notes to expire, and every one is an event written; so the figure compared is the time
per note expired, and the reading of the due notes through the `notes_due` index is shown apart (it
must not grow with the notes stored). `--due 1000` (a count) keeps the notes due the same at every
size: then the whole sweep is compared.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from bench.machine import finish, machine_info
from bench.scratch import scratch_schema
from engram.domain.note import Lifecycle, Note, NoteKind
from engram.projections.notes import utc_text
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings

SAVE_NOTES = 2_000
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class FixedClock:
    """The sweep's clock: a fixed instant, so that what is due does not move while it runs."""

    def now(self) -> datetime:
        return NOW


@contextmanager
def _store(root: Path, database_url: str | None) -> Iterator[Engram]:
    if database_url:
        with scratch_schema(database_url, "bench_notes_") as url:
            e = bootstrap(
                Settings(data_dir=root, database_url=url, embedder="hashing", llm="none"), clock=FixedClock()
            )
            try:
                yield e
            finally:
                e.close()
        return
    e = bootstrap(Settings(data_dir=root, embedder="hashing", llm="none"), clock=FixedClock())
    try:
        yield e
    finally:
        e.close()


def _due_count(size: int, due: str) -> int:
    return round(size * float(due[:-1]) / 100) if due.endswith("%") else int(due)


def write_notes(e: Engram, size: int, due: int, beings: int) -> int:
    """`size` notes, `due` of them due at `NOW`; returns how many transactions wrote them."""
    ids = [uuid.UUID(e.beings.register(f"being-{i:04d}").being_id) for i in range(beings)]
    every = max(size // max(due, 1), 1)
    old = NOW - timedelta(days=3)
    pending: list[Note] = []
    transactions = 0
    made_due = 0
    for i in range(size):
        being = ids[i % beings]
        at = NOW - timedelta(minutes=i % 10_000)
        if made_due < due and i % every == 0:
            life = Lifecycle(NoteKind.LOG, NOW, stability="volatile", ttl_days=1, at=old)
            made_due += 1
        elif i % 2:
            life = Lifecycle(NoteKind.LOG, NOW, ttl_days=30, at=at)
        else:
            life = Lifecycle(NoteKind.KNOWLEDGE, NOW, at=at)
        kind = NoteKind.LOG if life.ttl_days is not None else NoteKind.KNOWLEDGE
        pending.append(Note.take(uuid.uuid4(), being, kind, f"note {i} of the bench", at, lifecycle=life))
        if len(pending) >= SAVE_NOTES:
            e.store.save(*pending)
            pending.clear()
            transactions += 1
    if pending:
        e.store.save(*pending)
        transactions += 1
    return transactions


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def find_due(e: Engram, batch: int) -> int:
    """Every batch's read of the due notes, as the sweep makes them, writing nothing."""
    read, now, after, found = e.views.read, utc_text(NOW), None, 0
    while True:
        rows = read.notes_due(now, after=after, limit=batch)
        found += len(rows)
        if len(rows) < batch:
            return found
        after = (rows[-1]["expires_at"], rows[-1]["id"])


def analyze(e: Engram) -> None:
    """PostgreSQL: the planner statistics autovacuum gathers soon after a bulk load, gathered now, so
    that the plan is the one a running deployment gets (SQLite's planner needs none here)."""
    if e.views.dbs["notes"].dialect != "postgres":
        return
    with e.views.read.reading("notes") as (conn, tables):
        conn.execute(f"ANALYZE {tables['notes']}")


def query_plan(e: Engram) -> str:
    """How the database reads the due notes (it should name the `notes_due` index)."""
    db = e.views.dbs["notes"]
    with e.views.read.reading("notes") as (conn, tables):
        table = tables["notes"]
        where = "expires_at IS NOT NULL AND NOT expired AND expires_at <= ?"
        sql = f"SELECT id, being_id, expires_at FROM {table} WHERE {where} ORDER BY expires_at, id LIMIT 500"  # noqa: S608
        prefix = "EXPLAIN QUERY PLAN " if db.dialect == "sqlite" else "EXPLAIN "
        rows = conn.query(prefix + sql, [utc_text(NOW)])
    return " / ".join(str(r.get("detail") or r.get("QUERY PLAN") or r) for r in rows)


def bench_size(
    size: int, due: str, beings: int, root: Path, database_url: str | None, log: Callable[[str], None]
) -> dict[str, Any]:
    count = _due_count(size, due)
    with _store(root / uuid.uuid4().hex, database_url) as e:
        write_s, transactions = _timed(lambda: write_notes(e, size, count, beings))
        log(f"  wrote {size:,} notes in {write_s:.1f} s ({transactions} transactions)")
        catch_up_s, _ = _timed(lambda: e.views.ensure(names=["notes"]))
        log(f"  notes view caught up in {catch_up_s:.1f} s")
        analyze(e)
        batch = e.note_expiry.batch_size
        find_s, found = _timed(lambda: find_due(e, batch))
        plan = query_plan(e)
        sweep_s, report = _timed(e.note_expiry.sweep)
        log(f"  sweep: {report.expired:,} expired in {sweep_s:.3f} s")
        return {
            "notes": size,
            "due": count,
            "found": found,
            "expired": report.expired,
            "batches": report.batches,
            "write_s": round(write_s, 2),
            "catch_up_s": round(catch_up_s, 2),
            "find_due_s": round(find_s, 4),
            "sweep_s": round(sweep_s, 4),
            "sweep_us_per_note": round(sweep_s / max(report.expired, 1) * 1e6, 1),
            "plan": plan,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated note counts")
    parser.add_argument("--due", default="1%", help="notes due: a share (1%%) or a count (1000)")
    parser.add_argument("--beings", type=int, default=100, help="beings the notes are spread over")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a schema per size is created)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-notes-sweep-") as tmp:
        for n in sizes:
            log(f"size {n:,}")
            results.append(bench_size(n, args.due, args.beings, Path(tmp), args.database_url, log))
    ratio = None
    if len(results) >= 2:
        small, large = results[0], results[-1]
        ratio = {
            "sizes": f"{large['notes']}/{small['notes']}",
            "sweep": round(large["sweep_s"] / small["sweep_s"], 2),
            "per_note": round(large["sweep_us_per_note"] / small["sweep_us_per_note"], 2),
            "find_due_per_note": round(
                (large["find_due_s"] / max(large["found"], 1))
                / (small["find_due_s"] / max(small["found"], 1)),
                2,
            ),
        }
    backend = "postgres" if args.database_url else "sqlite"
    result = {
        "benchmark": "notes-sweep",
        "meta": {**machine_info(), "backend": backend, "due": args.due, "beings": args.beings},
        "sizes": results,
        "ratio": ratio,
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"# notes expiry sweep — {backend}, {args.due} due, {args.beings} beings")
    print("| notes | due | batches | find due (s) | sweep (s) | µs per note expired |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['notes']:,} | {r['expired']:,} | {r['batches']} | {r['find_due_s']:.4f} | "
            f"{r['sweep_s']:.3f} | {r['sweep_us_per_note']:.1f} |"
        )
    for r in results:
        print(f"plan at {r['notes']:,}: {r['plan']}")
    if ratio:
        print(
            f"\nratio {ratio['sizes']}: whole sweep {ratio['sweep']}, per note expired {ratio['per_note']} "
            f"(goal ≤ 2), finding due notes per note {ratio['find_due_per_note']}"
        )


if __name__ == "__main__":
    main()
