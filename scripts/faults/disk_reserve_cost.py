"""What the vector index's free-space check costs per write (ADR 0030).

    .venv/bin/python scripts/faults/disk_reserve_cost.py [DIR]

Times `DiskReserve.require` (one `statvfs`) against the index writes it guards, on Qdrant Edge in
DIR (default: a temporary directory on the disk of the current one): an upsert of one point and of
500 (a patrol's batch), and a payload patch of 3 points (a recall's reactivations of dying nodes).
Best of 5 rounds each.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engram.adapters.vectors.edge import EdgeVectorIndex
from engram.projections.vector_index import PayloadPatch, VectorPoint


def best_us(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            fn()
        times.append((time.perf_counter() - started) / rounds)
    return min(times) * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else ".") as tmp:
        index = EdgeVectorIndex(Path(tmp) / "vectors")
        index.ensure_collection("c", 384)
        rng, being, position = np.random.default_rng(0), str(uuid.uuid4()), [1]

        def points(count: int) -> list[VectorPoint]:
            position[0] += 1
            payload = {"being_id": being, "status": "active", "position": position[0]}
            return [
                VectorPoint(uuid.uuid4(), rng.random(384, dtype=np.float32), payload) for _ in range(count)
            ]

        three = points(3)
        index.upsert("c", three)

        def patch() -> None:
            position[0] += 1
            index.patch_payloads("c", [PayloadPatch([p.id for p in three], {"status": "dying"}, position[0])])

        one, batch = points(1), points(500)
        check = best_us(index._disk.require, 20_000)
        rows = [
            ("upsert of 1 point", best_us(lambda: index.upsert("c", one), 2_000)),
            ("upsert of 500 points", best_us(lambda: index.upsert("c", batch), 20)),
            ("patch of 3 points", best_us(patch, 2_000)),
        ]
        index.close()
    print(f"free-space check (statvfs): {check:.1f} µs")
    for name, us in rows:
        print(f"{name}: {us:,.0f} µs, of which the check {check / us:.2%}")


if __name__ == "__main__":
    main()
