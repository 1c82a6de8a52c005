"""The context pack and the notes list at 1k, 10k and 100k notes of one being (issue #9, ADR 0049).

    engram bench notes [--sizes 1000 10000 100000] [--query-sizes 1000 10000] [--calls 200]
                       [--database-url …] [--json-out FILE]

For each size, on a fresh deployment (the hashing embedder, no LLM): one being's notes of the
lifecycle's kinds (log, summary, rule, knowledge, todo), 5% sensitive and 5% already expired, taken in
batches of 500 and projected. Then, timed one call at a time through the public API:

- `pack`: `Packing.pack(being)` (the 20 most recent live notes; goal p95 ≤ 5 ms at 100k);
- `list`: `engram notes list` as the Python API runs it, `engram.listing.notes(being)` (the 50 newest
  active notes, not sensitive); `list_tag`: the same with a tag filter (`tags=["jobs"]`);
- at the query sizes, `pack --query`: first the call that embeds every note (`Note.Embedded`, once),
  then `Packing.pack(being, query=…)` p50/p95.

Figures are printed (`--json`: the JSON result alone on stdout, as `engram bench all` keeps it;
`--json-out FILE`: also saved); nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.machine import finish, machine_info
from bench.metrics import percentile
from bench.scratch import scratch_schema
from engram.adapters.logging import configure_logging
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings

WORDS = [
    "garden",
    "tomato",
    "lisbon",
    "flight",
    "hotel",
    "garage",
    "door",
    "code",
    "invoice",
    "meeting",
    "report",
    "chess",
    "book",
    "river",
    "bread",
    "market",
    "train",
    "bicycle",
    "umbrella",
    "piano",
    "window",
    "letter",
    "coffee",
    "harbour",
    "ticket",
    "lantern",
    "violin",
]
QUERIES = ["garage door code", "flight to lisbon", "invoice for the meeting", "piano lesson", "bread market"]
BATCH = 500


def _note(i: int, now: Any) -> NoteInput:
    words = " ".join(WORDS[(i * k + 7) % len(WORDS)] for k in (1, 3, 5, 11))
    kind = ("log", "summary", "rule", "knowledge", "todo")[i % 5]
    fields: dict[str, Any] = {"at": now - timedelta(minutes=i), "tags": ["jobs" if i % 10 == 0 else "home"]}
    if kind == "rule":
        fields["evidence"] = ["seen in chat"]
    if i % 20 == 3:
        fields["sensitivity"] = "sensitive"
    if i % 20 == 7:  # happened 40 days ago, lived 30: expired on arrival
        fields.update(at=now - timedelta(days=40), ttl_days=30)
    return NoteInput(kind=kind, text=f"note {i}: {words}", **fields)


def populate(e: Engram, n: int) -> float:
    """`n` notes for Aria; seconds taken (intake and projection)."""
    e.beings.register("Aria")
    now = e.clock.now()
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        e.notes.take_many("Aria", [_note(i, now) for i in range(start, min(n, start + BATCH))])
    e.views.ensure()
    return time.perf_counter() - started


def timed(fn: Any, calls: int) -> dict[str, float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(percentile(times, 50), 3),
        "p95_ms": round(percentile(times, 95), 3),
        "calls": calls,
    }


def measure(settings: Settings, n: int, calls: int, with_query: bool) -> dict[str, Any]:
    e = bootstrap(settings)
    try:
        out: dict[str, Any] = {"notes": n, "populate_s": round(populate(e, n), 2)}
        e.packing.pack("Aria")  # warm: connections, prepared statements
        out["pack"] = timed(lambda: e.packing.pack("Aria"), calls)
        out["pack"]["notes_returned"] = len(e.packing.pack("Aria").notes)
        out["list"] = timed(lambda: e.listing.notes("Aria"), calls)
        out["list_tag"] = timed(lambda: e.listing.notes("Aria", tags=["jobs"]), calls)
        if with_query:
            started = time.perf_counter()
            e.packing.pack("Aria", query=QUERIES[0])
            out["first_query_embeds_s"] = round(time.perf_counter() - started, 2)
            k = iter(range(10**9))
            out["pack_query"] = timed(
                lambda: e.packing.pack("Aria", query=QUERIES[next(k) % len(QUERIES)]), max(5, calls // 4)
            )
        return out
    finally:
        e.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="engram bench notes", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--query-sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--database-url", default=None, help="Measure on PostgreSQL instead of SQLite.")
    parser.add_argument("--json", action="store_true", help="print the JSON result alone on stdout")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    backend = "postgres" if args.database_url else "sqlite"
    result: dict[str, Any] = {"benchmark": "notes", "backend": backend, "machine": machine_info(), "runs": []}
    for n in args.sizes:
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="engram-notes-bench-"))
            # PostgreSQL: a schema of its own per size, dropped afterwards (runs never see each other).
            url = (
                stack.enter_context(scratch_schema(args.database_url, "bench_pack_"))
                if args.database_url
                else None
            )
            settings = Settings(
                data_dir=Path(tmp), embedder="hashing", llm="none", **({"database_url": url} if url else {})
            )
            run = measure(settings, n, args.calls, n in args.query_sizes)
        result["runs"].append(run)
        line = (
            f"{n:>7} notes: pack p50 {run['pack']['p50_ms']:.2f} ms p95 {run['pack']['p95_ms']:.2f} ms; "
            f"list p50 {run['list']['p50_ms']:.2f} ms p95 {run['list']['p95_ms']:.2f} ms; "
            f"list --tag p50 {run['list_tag']['p50_ms']:.2f} ms p95 {run['list_tag']['p95_ms']:.2f} ms"
        )
        if "pack_query" in run:
            line += (
                f"; pack --query p50 {run['pack_query']['p50_ms']:.2f} ms p95 "
                f"{run['pack_query']['p95_ms']:.2f} ms (first, embedding every note: "
                f"{run['first_query_embeds_s']:.1f} s)"
            )
        print(
            line + f"  [intake {run['populate_s']} s]",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
