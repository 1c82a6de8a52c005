"""Small changes stay cheap: batched node loads, and vector writes that follow what an event changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest

from domain.being import Being
from domain.cluster import Cluster
from domain.embedding import Embedding
from domain.node import MemoryNode, NodeStatus, ReactivationSource
from domain.scene import validate_scene_object
from projections.vectors import centroids_alias, nodes_alias
from services.bootstrap import Engram
from services.errors import NotFound

MODEL = "m"


def _scene(i: int, importance: float = 0.5) -> Any:
    return validate_scene_object(
        {"action": f"scene {i}", "actors": ["me"], "when": ["2026-05-02"], "importance": importance}
    )


def _vector(*values: float) -> Embedding:
    return Embedding.from_floats(MODEL, list(values))


def _being(engram: Engram, name: str) -> tuple[Being, Cluster]:
    being, business, private = Being.register(name, engram.clock.now())
    engram.store.save(being, business, private)
    return being, business


def _state(node: MemoryNode) -> dict[str, Any]:
    return dict(vars(node))


def test_get_many_loads_what_get_loads(engram: Engram) -> None:
    being, root = _being(engram, "Aria")
    nodes = [MemoryNode.create(uuid4(), _scene(i), root, 0, engram.clock.now()) for i in range(5)]
    for i, node in enumerate(nodes):
        node.embed(_vector(1.0, float(i), 0.5), engram.clock.now())
    engram.store.save(*nodes)
    # One node long enough to have snapshots (every 50 events), and events after the last one.
    busy = engram.store.get(MemoryNode, nodes[2].id)
    for _ in range(2):
        for _ in range(30):
            busy.reactivate(ReactivationSource.RECALL, 1, engram.clock.now())
        engram.store.save(busy)
    assert busy.version > 50
    ids = [n.id for n in reversed(nodes)] + [nodes[0].id]  # any order, repeats allowed

    loaded = engram.store.get_many(MemoryNode, ids, being_id=being.id)

    assert [n.id for n in loaded] == ids
    for node in loaded:
        assert _state(node) == _state(engram.store.get(MemoryNode, node.id))
    assert engram.store.get_many(MemoryNode, []) == []


def test_get_many_reads_foreign_and_unknown_ids_as_not_found(engram: Engram) -> None:
    aria, root = _being(engram, "Aria")
    bo, _ = _being(engram, "Bo")
    node = MemoryNode.create(uuid4(), _scene(1), root, 0, engram.clock.now())
    engram.store.save(node)
    for ids, being_id in (([node.id], bo.id), ([node.id, uuid4()], aria.id), ([aria.id], None)):
        with pytest.raises(NotFound):
            engram.store.get_many(MemoryNode, ids, being_id=being_id)


class Spy:
    """Records the vector index's writes per collection kind ("nodes" or "centroids")."""

    def __init__(self, engram: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, list[UUID]]] = []
        index = engram.views.vector_index
        for method in ("upsert", "set_payloads"):
            monkeypatch.setattr(index, method, self._wrap(method, getattr(index, method)))

    def _wrap(self, method: str, inner: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        def call(collection: str, items: Any) -> None:
            kind = "nodes" if collection.startswith("engram_nodes") else "centroids"
            self.calls.append((method, kind, [item.id for item in items]))
            inner(collection, items)

        return call

    def take(self) -> list[tuple[str, str, list[UUID]]]:
        calls, self.calls = self.calls, []
        return calls


def _point(engram: Engram, being_id: UUID, node_id: UUID) -> tuple[dict[str, Any], np.ndarray[Any, Any]]:
    [point] = engram.views.vector_index.retrieve(nodes_alias(MODEL), being_id, [node_id], with_vectors=True)
    assert point.vector is not None
    return dict(point.payload), np.asarray(point.vector)


def _centroid(engram: Engram, being_id: UUID, cluster_id: UUID) -> np.ndarray[Any, Any] | None:
    found = engram.views.vector_index.retrieve(
        centroids_alias(MODEL), being_id, [cluster_id], with_vectors=True
    )
    return np.asarray(found[0].vector) if found and found[0].vector is not None else None


def _unit(*values: float) -> np.ndarray[Any, Any]:
    v = np.asarray(values, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_vector_writes_follow_what_an_event_changed(engram: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
    being, root = _being(engram, "Aria")
    sub = Cluster.create_sub(uuid4(), root, "garden", engram.clock.now())
    node = MemoryNode.create(uuid4(), _scene(1), sub, 0, engram.clock.now())
    node.embed(_vector(1.0, 0.0, 0.0), engram.clock.now())
    engram.store.save(sub, node)
    spy = Spy(engram, monkeypatch)
    engram.views.ensure()
    assert ("upsert", "nodes", [node.id]) in spy.take()

    # A read reactivating an active node changes nothing a point or a centroid holds: no write at all.
    node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    assert spy.take() == []
    payload, _ = _point(engram, being.id, node.id)
    assert payload["status"] == NodeStatus.ACTIVE

    # A status change rewrites the node's payload only; the centroid it left is removed.
    node.flag_dying(node.dying_cycle, engram.clock.now())
    position = engram.store.save(node)
    engram.views.ensure()
    calls = spy.take()
    assert ("set_payloads", "nodes", [node.id]) in calls
    assert not [c for c in calls if c[:2] == ("upsert", "nodes")]
    payload, vector = _point(engram, being.id, node.id)
    assert payload["status"] == NodeStatus.DYING and payload["position"] == position
    assert np.allclose(vector / np.linalg.norm(vector), _unit(1.0, 0.0, 0.0), atol=1e-6)
    assert _centroid(engram, being.id, sub.id) is None

    # Back to active (a read), then a new vector: the whole point is written, and the centroid holds
    # the new vector only.
    node.reactivate(ReactivationSource.RECALL, node.dying_cycle, engram.clock.now())
    node.embed(_vector(0.0, 1.0, 0.0), engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    assert ("upsert", "nodes", [node.id]) in spy.take()
    _, vector = _point(engram, being.id, node.id)
    assert np.allclose(vector / np.linalg.norm(vector), _unit(0.0, 1.0, 0.0), atol=1e-6)
    centroid = _centroid(engram, being.id, sub.id)
    assert centroid is not None
    assert np.allclose(centroid / np.linalg.norm(centroid), _unit(0.0, 1.0, 0.0), atol=1e-6)


def test_patrol_flags_and_revives_more_nodes_than_one_load_batch(engram: Engram) -> None:
    """❸ and ❺ load and save in batches (services/patrol/mechanical.py): every candidate is changed once."""
    from services.patrol.mechanical import CHANGE_BATCH

    being, root = _being(engram, "Aria")
    count = CHANGE_BATCH + 7
    nodes = [MemoryNode.create(uuid4(), _scene(i, 0.5), root, 0, engram.clock.now()) for i in range(count)]
    for i, node in enumerate(nodes):
        node.embed(_vector(1.0, float(i % 7), 0.5), engram.clock.now())
    for start in range(0, count, 200):
        engram.store.save(*nodes[start : start + 200])
    being = engram.store.get(Being, being.id)
    for _ in range(nodes[0].dying_cycle - 1):  # the patrol's own cycle reaches the dying cycle
        being.start_patrol_cycle(engram.clock.now())
    engram.store.save(being)

    report = engram.patrol("Aria")

    steps = {s["step"]: s for s in report.steps}
    assert steps["flag_dying"]["counts"]["flagged_dying"] == count
    rows = engram.views.read.nodes(being.id, statuses=["dying"])
    assert len(rows) == count
    assert all(n.status == NodeStatus.DYING for n in engram.store.get_many(MemoryNode, [n.id for n in nodes]))
    assert engram.views.vector_index.count(nodes_alias(MODEL), being.id) == count
