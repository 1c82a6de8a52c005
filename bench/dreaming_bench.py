"""The dreaming tick's cost at 10k and 100k memories (issue #12, ADR 0062), on SQLite + Qdrant Edge.

    engram bench dreaming [--sizes 10000,100000] [--new 100] [--dead 100] [--json] [--json-out FILE]

Per size, a fresh store gets one being with that many nodes, written with the domain
(`MemoryNode.create` + a 384-dimension vector: groups of about 20 around a random centre, so that
neighbours inside a group sit near cosine 0.7 and other pairs near 0), then the views catch up and
the node collection's HNSW index is built (`optimize()`, what the worker's vector maintenance does).
Timed:

- the backlog: dream ticks until every memory is linked (`links`, 100 memories a tick);
- a tick after `--new` new memories: the tick of a being whose earlier memories are linked. The
  goal: under 1 s at 100k excluding LLM calls, and about the same at 10k and 100k (linking costs
  what is new, not what is there);
- a tick after `--dead` linked nodes died: `link_cleanup` removes their links;
- one hop of retrieval along the links (`query --links`' expansion alone, the top 3 hits of a
  sample of nodes, 2 links each): p50/p95 (the issue's budget: 2 ms p95 at 100k nodes);
- the links per memory (mean, percentiles, share with none).

No LLM is configured: the LLM steps skip, as they would in a tick's cost "excluding LLM calls".
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import structlog

from bench.machine import finish, machine_info
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode
from engram.domain.scene import SceneInput
from engram.projections.vectors import nodes_alias
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.reading import NodeView

MODEL, DIM = "bench-384", 384
GROUP = 20
SPREAD = 0.032
"""Each vector is its group's centre plus N(0, SPREAD²) per dimension: two of a group meet at cosine
≈ 1 / (1 + 384·SPREAD²) ≈ 0.72, around the link threshold."""
SAVE_BATCH = 1_000
SAMPLES = 300


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else 0.0


def _vectors(rng: np.random.Generator, n: int, centres: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    picks = rng.integers(0, len(centres), n)
    v = centres[picks] + rng.normal(0.0, SPREAD, (n, DIM))
    out: np.ndarray[Any, Any] = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def _write(engram: Engram, root: Cluster, vectors: np.ndarray[Any, Any], importance: float) -> list[UUID]:
    at = engram.clock.now()
    ids: list[UUID] = []
    for first in range(0, len(vectors), SAVE_BATCH):
        nodes = []
        for j, vec in enumerate(vectors[first : first + SAVE_BATCH]):
            day = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=(first + j) % 600)
            scene = SceneInput.model_validate(
                {
                    "scene": {
                        "action": f"memory {first + j}",
                        "actors": ["me"],
                        "when": [day.date().isoformat()],
                    },
                    "importance": importance,
                }
            )
            node = MemoryNode.create(engram.ids.new_id(), scene, root, 0, at)
            node.embed(Embedding(MODEL, DIM, vec.astype("<f4").tobytes()), at)
            nodes.append(node)
        engram.store.save(*nodes)
        ids += [n.id for n in nodes]
    return ids


def _ticks_until_idle(engram: Engram, being: str) -> list[float]:
    times = []
    while True:
        started = time.perf_counter()
        report = engram.sleep.tick(being)
        times.append((time.perf_counter() - started) * 1000)
        if not report.did:
            return times


def _one_tick(engram: Engram, being: str) -> tuple[float, dict[str, int]]:
    engram.views.ensure()  # the worker's views are caught up; the tick's own cost is what is timed
    started = time.perf_counter()
    report = engram.sleep.tick(being)
    return round((time.perf_counter() - started) * 1000, 1), dict(report.did)


def bench_size(size: int, new: int, dead: int, root_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    settings = Settings(data_dir=root_dir / f"n{size}", embedder="hashing", llm="none", log_level="warning")
    engram = bootstrap(settings)
    try:
        rng = np.random.default_rng(size)
        centres = rng.normal(0.0, 1.0, (max(1, size // GROUP), DIM))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        being, business, private = Being.register("dreamer", engram.clock.now())
        engram.store.save(being, business, private)
        out: dict[str, Any] = {"size": size, "new": new, "dead": dead}
        started = time.perf_counter()
        _write(engram, business, _vectors(rng, size - dead, centres), 0.6)
        # Nodes of no importance, to die later (a node dies only once decayed).
        doomed = _write(engram, business, _vectors(rng, dead, centres), 0.0)
        out["write_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        engram.views.ensure()
        out["project_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        index = engram.views.vector_index
        collection = index.resolve_alias(nodes_alias(MODEL))
        if collection is not None:
            index.optimize(collection)
        out["optimize_s"] = round(time.perf_counter() - started, 1)
        log(
            f"[{size}] written {out['write_s']} s, projected {out['project_s']} s, HNSW {out['optimize_s']} s"
        )

        engram.sleep.sleep("dreamer", hours=23)
        while engram.sleep.tick("dreamer").phase != "dreaming":  # compacting has nothing to do here
            pass
        started = time.perf_counter()
        backlog = _ticks_until_idle(engram, "dreamer")
        out["backlog"] = {
            "s": round(time.perf_counter() - started, 1),
            "ticks": len(backlog),
            "tick_ms_p50": _pct(backlog, 0.5),
            "tick_ms_max": round(max(backlog), 1),
        }
        log(f"[{size}] backlog linked in {out['backlog']['s']} s, {len(backlog)} ticks")

        _write(engram, business, _vectors(rng, new, centres), 0.6)
        ms, did = _one_tick(engram, "dreamer")
        out["tick_new"] = {"ms": ms, "did": did}
        log(f"[{size}] tick after {new} new memories: {ms} ms {did}")
        ms, did = _one_tick(engram, "dreamer")
        out["tick_idle"] = {"ms": ms, "did": did}

        nodes = engram.store.get_many(MemoryNode, doomed)
        for node in nodes:
            node.flag_dying(10_000, engram.clock.now())
            node.make_dead(10_000, "bench", engram.clock.now())
        engram.store.save(*nodes)
        ms, did = _one_tick(engram, "dreamer")
        out["tick_cleanup"] = {"ms": ms, "did": did}
        log(f"[{size}] tick after {dead} deaths: {ms} ms {did}")

        counts = sorted(engram.views.links.link_counts(being.id))
        out["links_per_memory"] = {
            "memories": len(counts),
            "links": sum(counts) // 2,
            "mean": round(sum(counts) / max(1, len(counts)), 2),
            "p50": _pct([float(c) for c in counts], 0.5),
            "p90": _pct([float(c) for c in counts], 0.9),
            "p99": _pct([float(c) for c in counts], 0.99),
            "max": counts[-1] if counts else 0,
            "none": round(sum(1 for c in counts if c == 0) / max(1, len(counts)), 4),
        }
        out["expansion_ms"] = _expansion(engram, being.id, rng)
        log(f"[{size}] one hop p50/p95: {out['expansion_ms']['p50']}/{out['expansion_ms']['p95']} ms")
        return out
    finally:
        engram.close()


def _expansion(engram: Engram, being_id: UUID, rng: np.random.Generator) -> dict[str, float]:
    """The cost `query --links` adds: one hop from 3 hits (random alive nodes of the being)."""
    reading = engram.reading
    alive = [str(r["id"]) for r in engram.views.read.nodes(being_id, statuses=["active"])]
    times = []
    for _ in range(SAMPLES):
        pick = [alive[int(i)] for i in rng.integers(0, len(alive), 3)]
        hits = [NodeView.of(r, 1.0) for r in engram.views.read.nodes(being_id, ids=[UUID(p) for p in pick])]
        started = time.perf_counter()
        reading._follow_links(being_id, hits, 10, {"active", "dying"}, set())
        times.append((time.perf_counter() - started) * 1000)
    return {"p50": _pct(times, 0.5), "p95": _pct(times, 0.95)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--new", type=int, default=100, help="new memories before the timed tick")
    parser.add_argument("--dead", type=int, default=100, help="linked nodes that die before the cleanup tick")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="engram-dreaming-") as tmp:
        runs = [bench_size(size, args.new, args.dead, Path(tmp), log) for size in sizes]
    result: dict[str, Any] = {"benchmark": "dreaming", "meta": machine_info(), "sizes": runs}
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        "| memories | backlog (s, ticks) | tick after new (ms) | idle tick (ms) | cleanup tick (ms) | "
        "links/memory mean, p90, none | one hop p95 (ms) |"
    )
    print("|---:|---:|---:|---:|---:|---|---:|")
    for r in runs:
        lpm = r["links_per_memory"]
        print(
            f"| {r['size']:,} | {r['backlog']['s']}, {r['backlog']['ticks']} | {r['tick_new']['ms']} | "
            f"{r['tick_idle']['ms']} | {r['tick_cleanup']['ms']} | {lpm['mean']}, {lpm['p90']}, {lpm['none']:.0%} | "
            f"{r['expansion_ms']['p95']} |"
        )


if __name__ == "__main__":
    main()
