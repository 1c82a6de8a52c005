"""HNSW builds outside the request path (ADR 0009).

- Qdrant Edge's `optimize()` builds on a copy in a child process: writes made meanwhile are kept,
  searches are served meanwhile, a collection dropped meanwhile stays dropped, and a crash between
  the two renames of the swap is repaired by the next instance;
- the worker's `VectorMaintenance` optimizes a node collection once it grew enough, and not again
  until it grows again; reads never optimize.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest

from engram.adapters.vectors import EdgeVectorIndex
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.projections.vector_index import PayloadUpdate, SearchFilter, VectorPoint
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.reading import Reading
from engram.services.worker import VectorMaintenance, Worker
from tests.support import SeededIds, SteppingClock

DIM = 16
BEING = UUID("00000000-0000-0000-0000-00000000000a")
OTHER = UUID("00000000-0000-0000-0000-00000000000b")


def unit(rng: np.random.Generator, n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    m = rng.normal(size=(n, DIM)).astype(np.float32)
    out: np.ndarray[Any, np.dtype[np.float32]] = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def point(vector: Any, being: UUID, position: int, status: str = "active") -> VectorPoint:
    return VectorPoint(uuid4(), vector, {"being_id": str(being), "position": position, "status": status})


def exact(points: list[VectorPoint], being: UUID, q: Any, k: int) -> list[UUID]:
    mine = [p for p in points if p.payload["being_id"] == str(being)]
    order = np.argsort(-np.array([float(np.dot(p.vector, q)) for p in mine]), kind="stable")
    return [mine[i].id for i in order[:k]]


@pytest.fixture
def index(tmp_path: Path) -> Any:
    # 1 KB: the test's small collections really get an HNSW index.
    idx = EdgeVectorIndex(tmp_path / "vectors", indexing_threshold_kb=1)
    idx.ensure_collection("nodes_g1", DIM)
    idx.set_alias("nodes", "nodes_g1")
    yield idx
    idx.close()


def test_optimize_builds_in_a_child_and_keeps_writes_made_meanwhile(
    index: EdgeVectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(1)
    points = [point(v, BEING if i % 4 else OTHER, i + 1) for i, v in enumerate(unit(rng, 400))]
    index.upsert("nodes", points)
    assert index.index_stats("nodes").indexed == 0
    late = [point(v, BEING, 1000 + i) for i, v in enumerate(unit(rng, 5))]
    moved, gone = points[1], points[2]
    served: list[int] = []
    original = EdgeVectorIndex._optimize_copy

    def while_building(self: EdgeVectorIndex, copy: Path) -> bool:
        # After the copy, before the swap: what the worker's projection and the readers do meanwhile.
        self.upsert("nodes", late)
        self.set_payloads(
            "nodes", [PayloadUpdate(moved.id, {**moved.payload, "status": "dying", "position": 999})]
        )
        self.delete("nodes", [gone.id])
        reader = threading.Thread(
            target=lambda: served.append(len(self.search("nodes", BEING, late[0].vector, 3)))
        )
        reader.start()
        reader.join()
        return original(self, copy)

    monkeypatch.setattr(EdgeVectorIndex, "_optimize_copy", while_building)
    index.optimize("nodes")

    assert served == [3]  # a search in another thread was served while the copy was being built
    stats = index.index_stats("nodes")
    assert stats.points == 400 + 5 - 1 and stats.indexed > 0
    assert index.last_optimize["changed"] is True
    assert index.retrieve("nodes", BEING, [gone.id]) == []
    assert index.retrieve("nodes", BEING, [moved.id])[0].payload["status"] == "dying"
    assert index.retrieve("nodes", BEING, [late[4].id])[0].payload["position"] == 1004
    everything = [p for p in points if p.id != gone.id] + late
    for q in unit(rng, 5):
        want = exact(everything, BEING, q, 5)
        assert [h.id for h in index.search("nodes", BEING, q, 5)] == want
    # A write after the swap lands in the new shard, and it survives a reopen.
    extra = point(unit(rng, 1)[0], BEING, 2000)
    index.upsert("nodes", [extra])
    root = index._root
    index.close()
    reopened = EdgeVectorIndex(root)
    try:
        assert reopened.count("nodes") == 405
        assert reopened.search("nodes", BEING, extra.vector, 1)[0].id == extra.id
        assert not any((root / "optimizing").glob("*")) and not any((root / "retired").glob("*"))
    finally:
        reopened.close()


def test_a_collection_dropped_while_it_is_optimized_stays_dropped(
    index: EdgeVectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    index.upsert("nodes", [point(v, BEING, i + 1) for i, v in enumerate(unit(rng, 200))])
    original = EdgeVectorIndex._optimize_copy

    def dropped_meanwhile(self: EdgeVectorIndex, copy: Path) -> bool:
        self.drop_collection("nodes_g1")  # a rebuild's switch dropping the old generation
        return original(self, copy)

    monkeypatch.setattr(EdgeVectorIndex, "_optimize_copy", dropped_meanwhile)
    index.optimize("nodes_g1")
    assert not index.collection_exists("nodes_g1")
    assert not any((index._root / "collections").glob("nodes_g1*"))


def test_a_crash_between_the_renames_of_the_swap_is_repaired(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    root = tmp_path / "vectors"
    first = EdgeVectorIndex(root, indexing_threshold_kb=1)
    first.ensure_collection("nodes_g1", DIM)
    points = [point(v, BEING, i + 1) for i, v in enumerate(unit(rng, 50))]
    first.upsert("nodes_g1", points)
    first.close()
    # As if the process died after moving the shard away and before moving its replacement in.
    (root / "retired").mkdir()
    (root / "collections" / "nodes_g1").rename(root / "retired" / "nodes_g1")
    (root / "optimizing" / "nodes_g1").mkdir(parents=True)
    second = EdgeVectorIndex(root)
    try:
        assert second.count("nodes_g1") == 50
        assert second.search("nodes_g1", BEING, points[7].vector, 1)[0].id == points[7].id
        assert not any((root / "optimizing").glob("*")) and not any((root / "retired").glob("*"))
    finally:
        second.close()


# -- the worker's maintenance ---------------------------------------------------------------------

SCENE = validate_scene_object({"action": "walked by the river", "actors": ["me"], "when": ["2026-04-01"]})


def add_nodes(e: Engram, cluster: Cluster, count: int, rng: random.Random) -> None:
    nodes = []
    for _ in range(count):
        node = MemoryNode.create(uuid4(), SCENE, cluster, 0, e.clock.now())
        node.embed(Embedding.from_floats("m", [rng.uniform(-1, 1) for _ in range(DIM)]), e.clock.now())
        nodes.append(node)
    e.store.save(*nodes)


@pytest.fixture
def engram(tmp_path: Path) -> Any:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())
    yield e
    e.close()


def root_cluster(e: Engram) -> Cluster:
    registered = e.beings.register("Aria")
    return e.store.get(Cluster, UUID(registered.roots["Business"]))


class Recorder:
    """Wraps the index's `optimize` to record (and still run) each call, and the thread it ran on."""

    def __init__(self, e: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        self.done = threading.Event()
        index = e.views.vector_index
        original = index.optimize

        def optimize(collection: str) -> None:
            self.calls.append((collection, threading.current_thread().name))
            original(collection)
            self.done.set()

        monkeypatch.setattr(index, "optimize", optimize)


def test_maintenance_optimizes_after_growth_and_not_again_until_more(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(4)
    cluster = root_cluster(engram)
    recorder = Recorder(engram, monkeypatch)
    maintenance = VectorMaintenance(engram.views, min_new_points=30)
    add_nodes(engram, cluster, 29, rng)
    engram.views.ensure()
    assert maintenance.due() == [] and maintenance.run() == []
    add_nodes(engram, cluster, 1, rng)
    engram.views.ensure()
    [collection] = maintenance.collections()
    assert maintenance.due() == [collection]
    [report] = maintenance.run()
    assert report["collection"] == collection and report["points"] == 30
    # Edge's default indexing threshold leaves so few points unindexed: growth, not the
    # unindexed count alone, decides when the next build is worth it.
    assert maintenance.due() == []
    add_nodes(engram, cluster, 29, rng)
    engram.views.ensure()
    assert maintenance.due() == []
    add_nodes(engram, cluster, 1, rng)
    engram.views.ensure()
    assert maintenance.due() == [collection]
    assert [c for c, _ in recorder.calls] == [collection]
    assert [r["collection"] for r in maintenance.run(force=True)] == [collection]


def test_the_worker_optimizes_in_its_maintenance_thread_and_reads_never_do(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    cluster = root_cluster(engram)
    add_nodes(engram, cluster, 40, rng)
    engram.views.ensure()
    recorder = Recorder(engram, monkeypatch)
    reading = Reading(engram, rng=random.Random(0))
    reading.recall("Aria", "walked by the river")
    reading.query("Aria", "walked by the river", 5)
    reading.query("Aria", "river", 5, reactivate=False)
    assert recorder.calls == []  # grown past any threshold, yet no read optimizes

    # As `engram worker` builds it: threshold and interval from ENGRAM_VECTOR_* settings.
    monkeypatch.setattr(engram.views.settings, "vector_optimize_min_points", 30)
    monkeypatch.setattr(engram.views.settings, "vector_maintenance_interval_s", 0.05)
    worker = Worker(engram.views, poll_interval=0.05)
    assert worker.maintenance is not None and worker.maintenance.min_new_points == 30
    worker.start()
    try:
        assert recorder.done.wait(60), "the worker's maintenance never optimized"
    finally:
        worker.stop()
    assert [name for _, name in recorder.calls] == ["vector-maintenance"]


def test_optimize_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from engram.adapters.cli.main import cli

    env = {"ENGRAM_DATA_DIR": str(tmp_path / "data"), "ENGRAM_EMBEDDER": "hashing", "ENGRAM_LLM": "none"}
    runner = CliRunner()
    assert runner.invoke(cli, ["being", "create", "Aria"], env=env).exit_code == 0
    scene = '{"action": "walked by the river", "actors": ["me"], "when": ["2026-04-01"]}'
    assert runner.invoke(cli, ["note", "Aria", "--scene", scene], env=env).exit_code == 0
    assert runner.invoke(cli, ["patrol", "Aria"], env=env).exit_code == 0
    quiet = runner.invoke(cli, ["projections", "optimize"], env=env)
    assert quiet.exit_code == 0, quiet.output
    assert "nothing to optimize" in quiet.output
    forced = runner.invoke(cli, ["projections", "optimize", "--force", "--json"], env=env)
    assert forced.exit_code == 0, forced.output
    assert '"points": 1' in forced.output


def test_searches_keep_their_filters_across_a_swap(index: EdgeVectorIndex) -> None:
    rng = np.random.default_rng(6)
    points = [point(v, BEING, i + 1, "dead" if i % 2 else "active") for i, v in enumerate(unit(rng, 300))]
    index.upsert("nodes", points)
    index.optimize("nodes")
    live = SearchFilter(statuses=frozenset({"active"}))
    q = unit(rng, 1)[0]
    want = exact([p for p in points if p.payload["status"] == "active"], BEING, q, 5)
    assert [h.id for h in index.search("nodes", BEING, q, 5, where=live)] == want
    assert index.search("nodes", OTHER, q, 5) == []
