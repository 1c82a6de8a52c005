#!/usr/bin/env python3
"""`recall` latency in the process that owns the embedded vector index against a process that reaches
it through its owner (ADR 0036), at 10k nodes per being by default. A measurement, not a test.

    PYTHONPATH=. python scripts/recall_through_owner.py [--nodes 10000] [--queries 200] [--embedder hashing|offline]

(from the repository root: the data is built by the benchmarks' `bench/` package, not installed).

Builds a data directory as `engram bench recall` does (being-0 holds N nodes with near-duplicate
vectors of generated sentences), then times, in fresh processes:
- owner: a process alone with the data directory (it owns the index, as `engram serve` does);
- client: a process beside a holder that owns it (as the CLI or `engram mcp` beside `engram serve`).
Each times `recall(being, text, vector=…)` (the query's embedding given: the transport is what
differs) and the vector search alone (top 3, as recall's), after a warm-up, and prints p50/p95 in ms.
Every recall reactivates what it returns, so each one also writes and catches its views up, in the
client through the owner.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.recall_bench import build_being, corpus, embed_all
from engram.adapters.logging import configure_logging
from engram.adapters.vectors import SharedEdgeVectorIndex, hold_vector_index
from engram.domain.ids import being_id_for_name
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from engram.services.reading import Reading
from engram.services.thresholds import thresholds_for

BEING = "being-0"


def settings(data: Path, embedder: str) -> Settings:
    return Settings(data_dir=data, embedder=embedder, llm="none", auto_patrol=False)  # type: ignore[arg-type]


def build(data: Path, embedder: str, nodes: int, queries: int) -> None:
    texts, _ = corpus(2000, queries, seed=7)
    with bootstrap(settings(data, embedder)) as engram:
        vectors = embed_all(engram, [t[0] for t in texts])
        build_being(engram, BEING, nodes, texts, vectors, np.random.default_rng(7))
        engram.views.ensure()


def timed(fn: Callable[[Any], object], args: Sequence[Any]) -> dict[str, float]:
    times = []
    for arg in args:
        started = time.perf_counter()
        fn(arg)
        times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(float(np.percentile(times, 95)), 3),
        "calls": len(times),
    }


def measure(data: Path, embedder: str, queries: int) -> dict[str, Any]:
    _, texts = corpus(2000, queries, seed=7)
    with bootstrap(settings(data, embedder)) as engram:
        reading = Reading(engram, rng=random.Random(0))
        vectors = embed_all(engram, texts)
        pairs = list(zip(texts, vectors, strict=True))
        being_id = being_id_for_name(BEING)
        model = engram.embedder.model_id
        threshold = thresholds_for(model).recall
        for text, vector in pairs[:10]:
            reading.recall(BEING, text, vector=vector)
        out = {
            "owns_the_index": bool(getattr(engram.views.vector_index, "owns", True)),
            "recall, vector given": timed(lambda p: reading.recall(BEING, p[0], vector=p[1]), pairs),
            "vector search top 3": timed(
                lambda v: engram.views.vectors.similar_nodes(
                    being_id, model, v, 3, statuses=["active", "dying"], threshold=threshold
                ),
                list(vectors),
            ),
        }
        assert isinstance(engram.views.vector_index, SharedEdgeVectorIndex)
        return out


def hold(data: Path, embedder: str) -> None:
    """Own the index until stdin closes, as a running `engram serve` does."""
    with bootstrap(settings(data, embedder)) as engram:
        hold_vector_index(engram.views.vector_index)
        engram.views.ensure()
        sys.stdout.write("holding\n")
        sys.stdout.flush()
        sys.stdin.read()


def child(*args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], text=True, **popen)  # noqa: S603 (this script)


def run_measure(data: Path, embedder: str, queries: int) -> dict[str, Any]:
    proc = child(
        "--measure", str(data), "--embedder", embedder, "--queries", str(queries), stdout=subprocess.PIPE
    )
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"measuring failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=["hashing", "offline"], default="hashing")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    configure_logging("warning")
    if args.measure:
        json.dump(measure(args.measure, args.embedder, args.queries), sys.stdout)
        return
    if args.hold:
        hold(args.hold, args.embedder)
        return
    with tempfile.TemporaryDirectory(prefix="engram-owner-") as tmp:
        data = Path(tmp) / "data"
        started = time.perf_counter()
        build(data, args.embedder, args.nodes, args.queries)
        print(f"built {args.nodes} nodes in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        results = {"owner": run_measure(data, args.embedder, args.queries)}
        holder = child(
            "--hold", str(data), "--embedder", args.embedder, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert holder.stdout is not None
            if holder.stdout.readline() != "holding\n":
                raise SystemExit("the holder did not start")
            results["client"] = run_measure(data, args.embedder, args.queries)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()
    if not results["owner"]["owns_the_index"] or results["client"]["owns_the_index"]:
        raise SystemExit(f"the runs did not own the index as intended: {results}")
    print(f"{args.nodes} nodes, {args.queries} queries, embedder {args.embedder}")
    print(f"{'':8} {'what':<24} {'p50 ms':>8} {'p95 ms':>8}")
    for role, result in results.items():
        for what in ("recall, vector given", "vector search top 3"):
            r = result[what]
            print(f"{role:8} {what:<24} {r['p50_ms']:>8.3f} {r['p95_ms']:>8.3f}")


if __name__ == "__main__":
    main()
