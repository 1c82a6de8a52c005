"""Filtered top-3 search latency of the `VectorIndex` adapters, side by side (not a test).

Data per size N: the target being holds N points, and 9 other beings hold N/10 each (so the
collection holds 1.9 N points and the being filter has real work to do). Vectors are random
unit vectors (dim 384 by default); payloads carry `status` drawn from active/dormant/archived.
Every query is the port's real call: `search(being=target, limit=3,
where=statuses {active, dormant})` with a fresh random unit query vector.

Engines, all through the adapters:
- `edge brute`: Qdrant Edge before any index build (exact search);
- `edge hnsw`: the same shard after `optimize()` (its duration is printed; it builds in a child process, ADR 0009),
  with the engine's default search ef, then `edge ef=N` rows with `--hnsw-ef` values;
- `qdrant local`: qdrant-client's in-memory local mode, at 10k only unless `--full`
  (pure Python: seconds per query at 100k).

`recall@3` compares each engine's top 3 to Edge's exact top 3 for the same queries. Random
unit vectors in 384 dims are a hard case for HNSW (no structure, every point nearly
equidistant), so the column says little about real embeddings: measure on those before
relying on HNSW recall.

    engram bench vectors [--sizes 10000,100000] [--queries 200] [--full] [--json] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from uuid import UUID

import numpy as np
import numpy.typing as npt

from bench.machine import finish, machine_info
from engram.adapters.logging import configure_logging
from engram.adapters.vectors import EdgeVectorIndex, QdrantVectorIndex
from engram.projections.vector_index import SearchFilter, VectorIndex, VectorPoint

OTHER_BEINGS = 9
STATUSES = ("active", "dormant", "archived")
WHERE = SearchFilter(statuses=frozenset({"active", "dormant"}))
BATCH = 1000
LIMIT = 3
COLLECTION = "bench"
TARGET = UUID("00000000-0000-4000-8000-00000000beef")

Matrix = npt.NDArray[np.float32]


@dataclass
class Row:
    size: int
    total_points: int
    engine: str
    queries: int
    p50_ms: float
    p95_ms: float
    recall_at_3: float | None
    load_s: float | None = None
    optimize_s: float | None = None


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> Matrix:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    normed: Matrix = m / np.linalg.norm(m, axis=1, keepdims=True)
    return normed


def dataset(size: int, dim: int, seed: int) -> Iterator[list[VectorPoint]]:
    """Batches of points: the target being's N first, then 9 beings with N/10 each."""
    rng = np.random.default_rng(seed)
    beings = [TARGET] + [UUID(int=i + 1) for i in range(OTHER_BEINGS)]
    counts = [size] + [size // 10] * OTHER_BEINGS
    position = 0
    for being, count in zip(beings, counts, strict=True):
        for start in range(0, count, BATCH):
            n = min(BATCH, count - start)
            vectors = unit_rows(rng, n, dim)
            statuses = rng.integers(0, len(STATUSES), n)
            batch = []
            for v, s in zip(vectors, statuses, strict=True):
                position += 1
                batch.append(
                    VectorPoint(
                        # Same seed, same ids: recall compares engines point by point.
                        UUID(bytes=rng.bytes(16), version=4),
                        v,
                        {"being_id": str(being), "position": position, "status": STATUSES[int(s)]},
                    )
                )
            yield batch


def load(index: VectorIndex, size: int, dim: int, seed: int) -> tuple[int, float]:
    index.ensure_collection(COLLECTION, dim)
    started = time.perf_counter()
    total = 0
    for batch in dataset(size, dim, seed):
        index.upsert(COLLECTION, batch)
        total += len(batch)
    return total, time.perf_counter() - started


def measure(index: VectorIndex, queries: Matrix) -> tuple[list[float], list[list[UUID]]]:
    for q in queries[:3]:  # warm caches and lazy opens out of the timings
        index.search(COLLECTION, TARGET, q, LIMIT, where=WHERE)
    times: list[float] = []
    results: list[list[UUID]] = []
    for q in queries:
        started = time.perf_counter()
        hits = index.search(COLLECTION, TARGET, q, LIMIT, where=WHERE)
        times.append((time.perf_counter() - started) * 1000)
        results.append([h.id for h in hits])
    return times, results


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def recall(results: list[list[UUID]], exact: list[list[UUID]]) -> float:
    hits = sum(len(set(r) & set(e)) for r, e in zip(results, exact, strict=False))
    return hits / max(1, sum(len(e) for e in exact[: len(results)]))


def row(
    size: int,
    total: int,
    engine: str,
    times: list[float],
    results: list[list[UUID]],
    exact: list[list[UUID]],
    **extra: float,
) -> Row:
    return Row(
        size=size,
        total_points=total,
        engine=engine,
        queries=len(times),
        p50_ms=round(statistics.median(times), 3),
        p95_ms=round(p95(times), 3),
        recall_at_3=round(recall(results, exact), 4),
        **{k: round(v, 2) for k, v in extra.items()},
    )


def bench_size(size: int, args: argparse.Namespace, tmp: Path, log: Callable[[str], None]) -> list[Row]:
    rows: list[Row] = []
    queries = unit_rows(np.random.default_rng(args.seed + 1), args.queries, args.dim)

    edge = EdgeVectorIndex(tmp / f"edge-{size}")
    try:
        log(f"[{size}] loading Edge …")
        total, load_s = load(edge, size, args.dim, args.seed)
        log(f"[{size}] Edge loaded {total} points in {load_s:.1f} s ({total / load_s:,.0f} points/s)")
        times, exact = measure(edge, queries)
        rows.append(row(size, total, "edge brute", times, exact, exact, load_s=load_s))
        log(f"[{size}] optimize() … (HNSW build in a child process)")
        started = time.perf_counter()
        edge.optimize(COLLECTION)
        optimize_s = time.perf_counter() - started
        log(f"[{size}] optimize() took {optimize_s:.1f} s")
        times, results = measure(edge, queries)
        rows.append(row(size, total, "edge hnsw", times, results, exact, optimize_s=optimize_s))
    finally:
        edge.close()
    for ef in args.hnsw_ef:
        # hnsw_ef is a search setting of the adapter: reopen the optimized shard with it.
        tuned = EdgeVectorIndex(tmp / f"edge-{size}", hnsw_ef=ef)
        try:
            times, results = measure(tuned, queries)
            rows.append(row(size, total, f"edge ef={ef}", times, results, exact))
        finally:
            tuned.close()

    if size <= 10_000 or args.full:
        local = QdrantVectorIndex.in_memory()
        try:
            log(f"[{size}] loading qdrant-client local mode …")
            total, load_s = load(local, size, args.dim, args.seed)
            n = args.queries if size <= 10_000 else min(args.queries, args.local_queries_large)
            times, results = measure(local, queries[:n])
            rows.append(row(size, total, "qdrant local", times, results, exact, load_s=load_s))
        finally:
            local.close()
    return rows


def table(rows: list[Row]) -> str:
    cols = ("size", "points", "engine", "queries", "p50 ms", "p95 ms", "recall@3")
    head = "{:>8} {:>8}  {:<13} {:>7} {:>9} {:>9} {:>8}".format(*cols)
    lines = [head, "-" * len(head)]
    for r in rows:
        rec = "-" if r.recall_at_3 is None else f"{r.recall_at_3:.3f}"
        note = ""
        if r.optimize_s is not None:
            note = f"  optimize {r.optimize_s:.1f} s"
        elif r.load_s is not None:
            note = f"  load {r.load_s:.1f} s"
        lines.append(
            f"{r.size:>8} {r.total_points:>8}  {r.engine:<13} {r.queries:>7} "
            f"{r.p50_ms:>9.3f} {r.p95_ms:>9.3f} {rec:>8}{note}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="points of the target being, comma-separated")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200, help="timed queries per engine and size")
    parser.add_argument(
        "--local-queries-large", type=int, default=20, help="queries for local mode above 10k (--full)"
    )
    parser.add_argument(
        "--hnsw-ef",
        type=lambda text: [int(x) for x in text.split(",") if x.strip()],
        default=[128, 512],
        help="extra Edge HNSW rows with these search ef values, comma-separated ('' for none)",
    )
    parser.add_argument("--full", action="store_true", help="also run qdrant-client local mode above 10k")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where the Edge shards go (default: a temp dir)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    configure_logging("warning")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for size in sizes:
            rows.extend(bench_size(size, args, Path(tmp), log))

    info = machine_info()
    setup = {
        "dim": args.dim,
        "limit": LIMIT,
        "layout": f"target being N points + {OTHER_BEINGS} beings x N/10",
        "filter": "being_id + status in {active, dormant} (~2/3 of the being's points)",
    }
    result = {
        "benchmark": "vector_search",
        "machine": info,
        "setup": setup,
        "rows": [asdict(r) for r in rows],
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"Filtered top-3 vector search through the VectorIndex adapters — {info['summary']}")
    for k, v in setup.items():
        print(f"  {k}: {v}")
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
