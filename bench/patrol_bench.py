#!/usr/bin/env python3
"""Patrol's mechanical steps on large beings, and ❶'s throughput with the offline embedder (not a test).

Part 1, per size N (default 10k and 100k nodes): one being whose nodes are written directly with the
domain (batched saves of 200 aggregates, random cluster-coherent 384-dim vectors), 99% of them in
sub-clusters of ~100 nodes and 1% in the roots. Last activations are spread so that at every
measured cycle 1% of the nodes cross eff_imp ≤ 0.05 and ❸ flags them (`--dying 100`: a fixed count
instead), and before each measured patrol 0.1% of the nodes, dead ones, are read (❺ revives
them; with `--dying 100`, 10 at every size). Each measured patrol runs without an LLM (❹ ❻ and
the diary are skipped) and without new notes; per-step durations come from the patrol's own report.
The figures are medians over `--runs` successive patrols (successive cycles, each with its own 1%).

Part 2: ❶ on `--scenes` new scene notes with the offline MiniLM embedder (scenes/s), next to the
embedder alone on the same texts (its own ceiling).

    engram bench patrol [--sizes 10000,100000] [--runs 3] [--scenes 1000] [--json]
        [--database-url postgresql://…]   # PostgreSQL instead of the embedded SQLite
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from bench import demo_scenes
from bench.machine import machine_info
from bench.scratch import scratch_schema
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.patrol_run import PatrolStep
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings

BATCH = 200
CLUSTER_SIZE = 100
DIM = 384
MODEL = f"hashing-{DIM}"  # the hashing embedder's model id, so patrol's vector queries find these vectors
TARGET_CYCLE = 100  # the first measured patrol's cycle
SLOTS = 6  # measured cycles (at most) with their share of nodes becoming dying
REVIVED = 0.001  # share of nodes (dead) read before each measured patrol
REVIVED_FIXED = 10  # with `--dying N` (a fixed count): dead nodes read before each patrol, at every size
MECHANICAL = [
    PatrolStep.NOTES_TO_NODES,
    PatrolStep.BIRTH_SUBCLUSTERS,
    PatrolStep.START_CYCLE,
    PatrolStep.FLAG_DYING,
    PatrolStep.REVIVE,
    PatrolStep.MERGE_SMALL,
]


def quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def settings_for(root: Path, database_url: str | None, embedder: str) -> Settings:
    kw: dict[str, Any] = {"database_url": database_url} if database_url else {}
    return Settings(data_dir=root / uuid.uuid4().hex, embedder=embedder, llm="none", **kw)


def unit(rng: np.random.Generator, center: np.ndarray[Any, Any], noise: float) -> Embedding:
    v = center + noise * rng.standard_normal(DIM)
    v = v / np.linalg.norm(v)
    return Embedding(MODEL, DIM, v.astype("<f4").tobytes())


def build(
    engram: Engram, n: int, dying_per_cycle: float, seed: int = 1
) -> tuple[uuid.UUID, list[uuid.UUID], float]:
    """A being with `n` nodes; returns its id, the dead nodes' ids and the build time."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    at = engram.clock.now
    being, business, private = Being.register(f"Bench{n}", at())
    for _ in range(TARGET_CYCLE - 1):
        being.start_patrol_cycle(at())
    engram.store.save(being, business, private)
    roots = [business, private]
    n_clusters = max(1, int(n * 0.99) // CLUSTER_SIZE)
    subs = [Cluster.create_sub(uuid.uuid4(), roots[i % 2], f"topic {i}", at()) for i in range(n_clusters)]
    for start in range(0, len(subs), BATCH):
        engram.store.save(*subs[start : start + BATCH])
    centers = rng.standard_normal((n_clusters + 2, DIM))
    period = max(1, round(n / dying_per_cycle))
    dead_every = round(1 / (3 * REVIVED))  # enough dead nodes for three runs
    dead: list[uuid.UUID] = []
    pending: list[MemoryNode] = []
    for i in range(n):
        in_root = i % 100 == 99
        cluster = roots[i % 2] if in_root else subs[(i // CLUSTER_SIZE) % n_clusters]
        center = centers[n_clusters + i % 2] if in_root else centers[(i // CLUSTER_SIZE) % n_clusters]
        slot = (i * 7919) % period  # 7919 is prime: every slot gets its share
        if slot < SLOTS:  # importance 0.5 read at TARGET − 70 + slot: dying at cycle TARGET + slot
            importance, activation = 0.5, TARGET_CYCLE - 70 + slot
        else:  # importance 0.9 read lately: dying 87 sessions later, after the measured cycles
            importance, activation = 0.9, TARGET_CYCLE - 1 - i % 40
        scene = validate_scene_object(
            {"action": f"bench scene {i}", "actors": ["me"], "when": ["2026-05-02"], "importance": importance}
        )
        node = MemoryNode.create(uuid.uuid4(), scene, cluster, activation, at())
        node.embed(unit(rng, center, 0.6), at())
        node.clear_fresh(at())
        if i % dead_every == dead_every // 2:
            node.flag_dying(node.dying_cycle, at())
            node.make_dead(node.dying_cycle, "bench", at())
            dead.append(node.id)
        pending.append(node)
        if len(pending) == BATCH:
            engram.store.save(*pending)
            pending = []
    if pending:
        engram.store.save(*pending)
    engram.views.ensure()
    return being.id, dead, time.perf_counter() - started


def read_dead(engram: Engram, being_id: uuid.UUID, ids: list[uuid.UUID]) -> None:
    """What `recall_memory` does to dead nodes (+2), so that ❺ has work."""
    cycle = engram.store.get(Being, being_id).cycle
    for start in range(0, len(ids), BATCH):
        nodes = [engram.store.get(MemoryNode, i) for i in ids[start : start + BATCH]]
        for node in nodes:
            node.reactivate(ReactivationSource.RECALL_MEMORY, cycle, engram.clock.now())
        engram.store.save(*nodes)
    engram.views.ensure()


def dying_per_cycle(n: int, dying: str) -> float:
    """`1%` of the nodes, or a fixed count such as `100`."""
    return n * float(dying[:-1]) / 100 if dying.endswith("%") else float(dying)


def revived_per_run(n: int, dying: str) -> int:
    """Dead nodes read before each patrol: 0.1 % of the nodes, or with a fixed dying count a fixed
    number too, so that the fixed run does the same work at every size (ADR 0013)."""
    return max(1, int(n * REVIVED)) if dying.endswith("%") else REVIVED_FIXED


def bench_size(
    n: int, runs: int, dying: str, root: Path, database_url: str | None, log: Callable[[str], None]
) -> dict[str, Any]:
    with scratch_schema(database_url) if database_url else _null() as scoped:
        settings = settings_for(root, scoped, "hashing")
        with bootstrap(settings) as engram:
            being_id, dead, build_s = build(engram, n, dying_per_cycle(n, dying))
            log(f"  built {n:,} nodes in {build_s:.1f} s")
            per_run: list[dict[str, float]] = []
            totals: list[float] = []
            counts: list[dict[str, Any]] = []
            per_read = revived_per_run(n, dying)
            for r in range(runs):
                read_dead(engram, being_id, dead[r * per_read : (r + 1) * per_read])
                started = time.perf_counter()
                report = engram.patrol(str(being_id))
                totals.append(time.perf_counter() - started)
                steps = {s["step"]: s for s in report.steps}
                per_run.append({s.value: steps[s.value]["duration_ms"] / 1000 for s in MECHANICAL})
                counts.append({s.value: steps[s.value].get("counts", {}) for s in MECHANICAL})
                log(
                    f"  run {r + 1}: cycle {report.cycle}, {totals[-1]:.3f} s, flagged "
                    f"{steps['flag_dying']['counts'].get('flagged_dying')}, revived "
                    f"{steps['revive']['counts'].get('revived')}"
                )
    median = {s.value: statistics.median(run[s.value] for run in per_run) for s in MECHANICAL}
    return {
        "nodes": n,
        "build_s": round(build_s, 2),
        "runs": runs,
        "step_median_s": {k: round(v, 4) for k, v in median.items()},
        "mechanical_median_s": round(statistics.median(sum(run.values()) for run in per_run), 4),
        "patrol_median_s": round(statistics.median(totals), 4),
        "counts_last_run": counts[-1],
    }


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def bench_notes(scenes: int, root: Path, database_url: str | None) -> dict[str, Any]:

    base = demo_scenes()
    texts = []
    for i in range(scenes):
        obj = dict(base[i % len(base)])
        obj["action"] = f"{obj.get('action', 'something happened')} (#{i})"
        texts.append(json.dumps(obj, ensure_ascii=False))
    with scratch_schema(database_url) if database_url else _null() as scoped:
        settings = settings_for(root, scoped, "offline")
        with bootstrap(settings) as engram:
            engram.beings.register("Scenes")
            for start in range(0, scenes, 500):
                engram.notes.take_many("Scenes", [NoteInput(text=t) for t in texts[start : start + 500]])
            engram.views.ensure()
            embedder = engram.embedder
            embedder.embed(["warm up"])
            scenes_in = [validate_scene_object(json.loads(t)) for t in texts]
            embed_texts = [s.scene.embed_text(s.feeling) for s in scenes_in]
            started = time.perf_counter()
            embedder.embed(embed_texts)
            embed_s = time.perf_counter() - started
            started = time.perf_counter()
            report = engram.patrol("Scenes")
            patrol_s = time.perf_counter() - started
            step = next(s for s in report.steps if s["step"] == PatrolStep.NOTES_TO_NODES.value)
    notes_s = step["duration_ms"] / 1000
    return {
        "scenes": scenes,
        "embedder": embedder.model_id,
        "embedder_alone_texts_per_s": round(scenes / embed_s, 1),
        "notes_to_nodes_s": round(notes_s, 3),
        "notes_to_nodes_scenes_per_s": round(scenes / notes_s, 1),
        "patrol_s": round(patrol_s, 3),
        "counts": step["counts"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=3, help=f"measured patrols per size (median), ≤ {SLOTS}")
    parser.add_argument(
        "--dying", default="1%", help="nodes becoming dying per cycle: a share (1%%) or a count (100)"
    )
    parser.add_argument("--scenes", type=int, default=1000, help="scene notes for the ❶ throughput (0: skip)")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a schema per size is created)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    quiet()

    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    meta = {
        **machine_info(),
        "backend": "postgres" if args.database_url else "sqlite",
        "vector_index": "qdrant-edge",
        "dying": args.dying,
        "revived": "0.1%" if args.dying.endswith("%") else REVIVED_FIXED,
        "runs": args.runs,
    }
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-patrol-") as tmp:
        for n in sizes:
            log(f"size {n:,}")
            results.append(bench_size(n, args.runs, args.dying, Path(tmp), args.database_url, log))
        notes = bench_notes(args.scenes, Path(tmp), args.database_url) if args.scenes else None
    ratio = None
    if len(results) >= 2:
        small, large = results[0], results[-1]
        ratio = {
            "sizes": f"{large['nodes']}/{small['nodes']}",
            "mechanical": round(large["mechanical_median_s"] / small["mechanical_median_s"], 2),
            "patrol": round(large["patrol_median_s"] / small["patrol_median_s"], 2),
        }
    result = {"benchmark": "patrol", "meta": meta, "sizes": results, "ratio": ratio, "notes_to_nodes": notes}
    meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"# patrol benchmark — {meta['summary']}")
    print(f"load average at end {meta['load_average_end']} (other processes may share the machine)")
    print(f"backend {meta['backend']}, vector index {meta['vector_index']}")
    print(
        f"\nmechanical steps, no LLM, {args.dying} of the nodes becoming dying per cycle, {meta['revived']} revived; "
        f"medians of {args.runs} patrols (s)\n"
    )
    header = ["step", *[f"{r['nodes']:,} nodes" for r in results]]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * len(results))
    for step in MECHANICAL:
        print(
            f"| {step.value} | " + " | ".join(f"{r['step_median_s'][step.value]:.4f}" for r in results) + " |"
        )
    print(
        "| **mechanical steps** | "
        + " | ".join(f"**{r['mechanical_median_s']:.4f}**" for r in results)
        + " |"
    )
    print("| whole patrol (wall) | " + " | ".join(f"{r['patrol_median_s']:.4f}" for r in results) + " |")
    print("| build (not measured) | " + " | ".join(f"{r['build_s']:.1f}" for r in results) + " |")
    if ratio:
        print(
            f"\nratio t({results[-1]['nodes']:,})/t({results[0]['nodes']:,}): mechanical {ratio['mechanical']}, "
            f"whole patrol {ratio['patrol']} (goal ≤ 2; < 1 s at 100k)"
        )
    for r in results:
        print(
            f"counts at {r['nodes']:,} (last run): { {k: v for k, v in r['counts_last_run'].items() if v} }"
        )
    if notes:
        print(
            f"\n❶ with {notes['embedder']}: {notes['scenes']} scenes in {notes['notes_to_nodes_s']:.2f} s = "
            f"{notes['notes_to_nodes_scenes_per_s']:.0f} scenes/s (embedder alone: "
            f"{notes['embedder_alone_texts_per_s']:.0f} texts/s); whole patrol {notes['patrol_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
