"""Fact writes: one hot key from 8 writers, and the throughput of `state_many` batches.

    engram bench facts-upsert [--writers 8] [--rounds 25] [--facts 100000] [--batch-size 1000]
                              [--database-url postgresql://…] [--json] [--json-out FILE]

Hot key: `--writers` threads, each with its own `Engram` over one store (as separate processes
would be, sharing nothing but the database), start together at a barrier and each state
`--rounds` revisions of one memory key. Every write must land as a version (ADR 0056/0057): the
result counts the versions written, the writes that failed, and the versions lost (expected minus
the fact's final version; goal 0).

Batches: `--facts` distinct facts (50 per subject) stated `--batch-size` to a transaction with
`FactCommands.state_many`, exactly as `engram facts import` and extraction write them, including the
follow-up of each write (the facts view caught up, archive by capacity).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from bench.machine import finish, machine_info
from bench.scratch import scratch_schema
from engram.domain.fact import Fact, FactContent, fact_key
from engram.domain.ids import fact_id_for_key
from engram.services.beings import resolve_being_id
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings

KEY = "profile|person|mina|fact"
PER_SUBJECT = 50


@contextmanager
def _settings(database_url: str | None) -> Iterator[Settings]:
    with tempfile.TemporaryDirectory(prefix="engram-facts-bench-") as tmp:
        base = {"data_dir": Path(tmp), "embedder": "hashing", "llm": "none"}
        if database_url:
            with scratch_schema(database_url) as url:
                yield Settings(**base, database_url=url)
        else:
            yield Settings(**base)


def hot_key(settings: Settings, writers: int, rounds: int) -> dict[str, Any]:
    engrams = [bootstrap(settings) for _ in range(writers)]
    try:
        engrams[0].beings.register("Aria")
        barrier = threading.Barrier(writers, timeout=120)
        failures: list[str] = []
        written = [0] * writers

        def write(i: int) -> None:
            barrier.wait()
            for r in range(rounds):
                try:
                    text = f"Mina's desk is number {i}-{r}"
                    engrams[i].facts.state_many("Aria", [FactContent(text, "mina", memory_key=KEY)])
                    written[i] += 1
                except Exception as exc:  # counted: a failed write is reported, never silent
                    failures.append(f"{type(exc).__name__}: {exc}")

        started = time.perf_counter()
        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
        owner = resolve_being_id(engrams[0].store, "Aria")
        key = fact_key(FactContent("x x x", "mina", memory_key=KEY))
        final = engrams[0].store.get(Fact, fact_id_for_key(owner, key)).version
        expected = writers * rounds
        return {
            "writers": writers,
            "rounds": rounds,
            "writes_expected": expected,
            "writes_returned": sum(written),
            "writes_failed": len(failures),
            "final_version": final,
            "versions_lost": sum(written) - final,  # returned as written, yet not in its history
            "seconds": round(seconds, 2),
            "failures": failures[:5],
        }
    finally:
        for e in engrams:
            e.close()


def batches(e: Engram, facts: int, batch_size: int, log: Callable[[str], None]) -> dict[str, Any]:
    e.beings.register("Bea")
    started = time.perf_counter()
    for start in range(0, facts, batch_size):
        batch = [
            FactContent(f"Fact {i} about subject {i // PER_SUBJECT}", f"user-{i // PER_SUBJECT}")
            for i in range(start, min(facts, start + batch_size))
        ]
        e.facts.state_many("Bea", batch)
        if (start // batch_size) % 20 == 19:
            log(f"  {start + len(batch):,}/{facts:,} facts")
    seconds = time.perf_counter() - started
    return {
        "facts": facts,
        "batch_size": batch_size,
        "seconds": round(seconds, 2),
        "facts_per_s": round(facts / seconds),
        "batch_ms": round(seconds * 1000 / -(-facts // batch_size), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25, help="writes of the hot key per writer")
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a scratch schema is created)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    backend = "postgres" if args.database_url else "sqlite"
    log(f"facts-upsert on {backend}: {args.writers} writers x {args.rounds}, {args.facts:,} facts")
    with _settings(args.database_url) as settings:
        hot = hot_key(settings, args.writers, args.rounds)
        log(
            f"  hot key: {hot['final_version']} versions, {hot['versions_lost']} lost, {hot['writes_failed']} failed"
        )
        with bootstrap(settings) as e:
            batch = batches(e, args.facts, args.batch_size, log)
    result = {
        "benchmark": "facts-upsert",
        "meta": {**machine_info(), "backend": backend, "goal_lost": 0},
        "hot_key": hot,
        "batches": batch,
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(render(result))


def render(result: dict[str, Any]) -> str:
    h, b = result["hot_key"], result["batches"]
    return "\n".join(
        [
            f"# facts-upsert — {result['meta']['backend']}",
            f"hot key: {h['writers']} writers x {h['rounds']} writes: {h['final_version']} versions of "
            f"{h['writes_expected']} expected, {h['versions_lost']} lost, {h['writes_failed']} failed "
            f"({h['seconds']} s)",
            f"state_many: {b['facts']:,} facts in batches of {b['batch_size']}: {b['facts_per_s']:,} facts/s "
            f"({b['batch_ms']} ms a batch, {b['seconds']} s)",
        ]
    )


if __name__ == "__main__":
    main()
