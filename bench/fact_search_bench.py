"""Fact search p50/p95 per profile at 10k and 100k facts in one space (issue #11, ADR 0059).

    engram bench fact-search [--sizes 10000 100000] [--calls 200] [--database-url …] [--json-out FILE]

For each size, on a fresh deployment (the hashing embedder, no LLM): one space shared by Aria and Bo
holds `n` facts (6 words each from a vocabulary of 3,000, a quarter of them with one of 500 entity
refs, 1% pinned), stated in batches of 1,000, embedded ahead (`fact_search.embed_pending`, as the
worker does), projected, and the vector collection optimized (HNSW, as the worker's maintenance
does). Then, timed one call at a time through the Python API with the query's vector given (the goal
excludes embedding the query): `fact_search.search(…, profile=P, vector=v)` for `hybrid`, `blended`
and `trust`, over 20 queries of 2–3 words of the vocabulary, entity cards and the foundation
included. Goal: p95 ≤ 10 ms and t(100k)/t(10k) ≤ 2.

Figures are printed (`--json`: the JSON result alone on stdout; `--json-out FILE`: also saved);
nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import finish, machine_info
from bench.metrics import percentile
from bench.scratch import scratch_schema
from engram.adapters.logging import configure_logging
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings

PROFILES = ("hybrid", "blended", "trust")
VOCABULARY = 3000
ENTITIES = 500
BATCH = 1000
GOAL_P95_MS = 10.0


def _word(i: int) -> str:
    letters = "bcdfghjklmnprstvz"
    vowels = "aeiou"
    out = ""
    for _ in range(3):
        out += letters[i % len(letters)] + vowels[(i // len(letters)) % len(vowels)]
        i //= len(letters) * len(vowels) // 3 + 1
    return out


WORDS = [f"{_word(i)}{i}" for i in range(VOCABULARY)]


def _fact(rng: random.Random, i: int) -> FactInput:
    words = " ".join(rng.choice(WORDS) for _ in range(6))
    fields: dict[str, Any] = {}
    if i % 4 == 0:
        fields["entity_refs"] = [f"person:p{rng.randrange(ENTITIES)}"]
        fields["importance"] = rng.choice([1, 2, 3])
    if i % 100 == 0:
        fields["pinned"] = True
    return FactInput(text=f"fact {i} {words}", subject=f"user{i % 200}", source_trust=rng.random(), **fields)


def populate(e: Engram, n: int) -> dict[str, float]:
    e.beings.register("Aria")
    e.beings.register("Bo")
    e.spaces.create("crew", ["Aria", "Bo"])
    rng = random.Random(7)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        e.facts.state_many("Aria", [_fact(rng, i) for i in range(start, min(n, start + BATCH))], space="crew")
    stated = time.perf_counter() - started
    e.fact_search.embed_pending()
    embedded = time.perf_counter() - started - stated
    e.views.ensure()
    optimized = time.perf_counter()
    for collection in e.views.fact_search.collections():  # what the worker's vector maintenance does
        e.views.vector_index.optimize(collection)
    optimize = time.perf_counter() - optimized
    return {
        "optimize_s": round(optimize, 2),
        "state_s": round(stated, 2),
        "embed_s": round(embedded, 2),
        "total_s": round(time.perf_counter() - started, 2),
    }


def timed(fn: Any, calls: int) -> dict[str, float]:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(percentile(times, 50), 3),
        "p95_ms": round(percentile(times, 95), 3),
        "calls": calls,
    }


def measure(settings: Settings, n: int, calls: int) -> dict[str, Any]:
    e = bootstrap(settings)
    try:
        out: dict[str, Any] = {"facts": n, "populate": populate(e, n)}
        rng = random.Random(11)
        queries = [" ".join(rng.choice(WORDS) for _ in range(rng.choice([2, 3]))) for _ in range(20)]
        vectors = [np.frombuffer(v.data, dtype="<f4").astype(np.float32) for v in e.embedder.embed(queries)]
        for profile in PROFILES:

            def call(i: int, profile: str = profile) -> None:
                e.fact_search.search(
                    "Bo", queries[i % 20], profile=profile, vector=vectors[i % 20], limit=8, min_trust=0.2
                )

            for i in range(5):  # warm: connections, statements, the index's pages
                call(i)
            out[profile] = timed(call, calls)
            out[profile]["hits"] = len(
                e.fact_search.search("Bo", queries[0], profile=profile, vector=vectors[0], min_trust=0.2).hits
            )
        return out
    finally:
        e.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="engram bench fact-search", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--database-url", default=None, help="Measure on PostgreSQL instead of SQLite.")
    parser.add_argument("--json", action="store_true", help="print the JSON result alone on stdout")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    backend = "postgres" if args.database_url else "sqlite"
    result: dict[str, Any] = {
        "benchmark": "fact-search",
        "backend": backend,
        "machine": machine_info(),
        "goal_p95_ms": GOAL_P95_MS,
        "runs": [],
    }
    for n in args.sizes:
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="engram-fact-bench-"))
            url = (
                stack.enter_context(scratch_schema(args.database_url, "bench_facts_"))
                if args.database_url
                else None
            )
            settings = Settings(
                data_dir=Path(tmp), embedder="hashing", llm="none", **({"database_url": url} if url else {})
            )
            run = measure(settings, n, args.calls)
        result["runs"].append(run)
        line = f"{n:>7} facts: " + "; ".join(
            f"{p} p50 {run[p]['p50_ms']:.2f} ms p95 {run[p]['p95_ms']:.2f} ms" for p in PROFILES
        )
        print(
            line + f"  [populate {run['populate']}]", file=sys.stderr if args.json else sys.stdout, flush=True
        )
    runs = result["runs"]
    if len(runs) >= 2:
        first, last = runs[0], runs[-1]
        result["ratio_p95"] = {
            p: round(last[p]["p95_ms"] / max(first[p]["p95_ms"], 1e-9), 2) for p in PROFILES
        }
        print(
            f"t({last['facts']})/t({first['facts']}) p95: {result['ratio_p95']}",
            file=sys.stderr if args.json else sys.stdout,
        )
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
