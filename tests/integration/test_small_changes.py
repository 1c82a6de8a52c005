"""Small changes stay cheap: batched node loads, and vector writes that follow what an event changed."""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import reduce
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.projections.engine.rows import RowCache
from engram.projections.memory import NODES
from engram.projections.vectors import centroids_alias, nodes_alias
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound
from engram.services.store import _project

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
    # One node long enough to have snapshots (every 10 events), and events after the last one.
    busy = engram.store.get(MemoryNode, nodes[2].id)
    for _ in range(2):
        for _ in range(27):
            busy.reactivate(ReactivationSource.RECALL, 1, engram.clock.now())
        engram.store.save(busy)
    assert busy.version > 50 and busy.version % 10 != 0
    assert engram.store.app.snapshots is not None
    [last] = engram.store.app.snapshots.get(busy.id, desc=True, limit=1)
    assert last.originator_version == busy.version // 10 * 10
    ids = [n.id for n in reversed(nodes)] + [nodes[0].id]  # any order, repeats allowed

    loaded = engram.store.get_many(MemoryNode, ids, being_id=being.id)

    assert [n.id for n in loaded] == ids
    for node in loaded:  # as the library replays it, past the aggregate cache
        assert _state(node) == _state(engram.store.app.repository.get(node.id, projector_func=_project))
    assert engram.store.get_many(MemoryNode, []) == []


def test_get_many_reads_foreign_and_unknown_ids_as_not_found(engram: Engram) -> None:
    aria, root = _being(engram, "Aria")
    bo, _ = _being(engram, "Bo")
    node = MemoryNode.create(uuid4(), _scene(1), root, 0, engram.clock.now())
    engram.store.save(node)
    for ids, being_id in (([node.id], bo.id), ([node.id, uuid4()], aria.id), ([aria.id], None)):
        with pytest.raises(NotFound):
            engram.store.get_many(MemoryNode, ids, being_id=being_id)


def test_get_being_and_many_loads_both_with_the_same_rules(engram: Engram) -> None:
    aria, root = _being(engram, "Aria")
    bo, _ = _being(engram, "Bo")
    nodes = [MemoryNode.create(uuid4(), _scene(i), root, 0, engram.clock.now()) for i in range(3)]
    engram.store.save(*nodes)
    being, loaded = engram.store.get_being_and_many(MemoryNode, [n.id for n in nodes], aria.id)
    assert _state(being) == _state(engram.store.get(Being, aria.id))
    assert [_state(n) for n in loaded] == [_state(engram.store.get(MemoryNode, n.id)) for n in nodes]
    assert engram.store.get_being_and_many(MemoryNode, [], aria.id)[1] == []
    for ids, being_id in (([nodes[0].id], bo.id), ([uuid4()], aria.id), ([nodes[0].id], root.id)):
        with pytest.raises(NotFound):
            engram.store.get_being_and_many(MemoryNode, ids, being_id)


class Spy:
    """Records the vector index's writes per collection kind ("nodes" or "centroids")."""

    def __init__(self, engram: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, list[UUID]]] = []
        index = engram.views.vector_index
        for method in ("upsert", "set_payloads", "patch_payloads"):
            monkeypatch.setattr(index, method, self._wrap(method, getattr(index, method)))

    def _wrap(self, method: str, inner: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        def call(collection: str, items: Any) -> None:
            kind = "nodes" if collection.startswith("engram_nodes") else "centroids"
            ids = [i for item in items for i in (item.ids if method == "patch_payloads" else [item.id])]
            self.calls.append((method, kind, ids))
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
    assert ("patch_payloads", "nodes", [node.id]) in calls
    assert not [c for c in calls if c[:2] == ("upsert", "nodes")]
    payload, vector = _point(engram, being.id, node.id)
    assert payload["status"] == NodeStatus.DYING and payload["position"] == position
    # The patch wrote the status (and the position); the fields it did not name kept their values.
    assert payload == {
        "being_id": str(being.id),
        "status": NodeStatus.DYING,
        "cluster_id": str(sub.id),
        "fresh": True,
        "pinned": False,
        "position": position,
    }
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
    from engram.services.patrol.mechanical import CHANGE_BATCH

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
    thresholds = gc.get_threshold()

    report = engram.patrol("Aria")

    assert gc.get_threshold() == thresholds  # collections ran less often during ❸ and ❺ only
    steps = {s["step"]: s for s in report.steps}
    assert steps["flag_dying"]["counts"]["flagged_dying"] == count
    rows = engram.views.read.nodes(being.id, statuses=["dying"])
    assert len(rows) == count
    assert all(n.status == NodeStatus.DYING for n in engram.store.get_many(MemoryNode, [n.id for n in nodes]))
    assert engram.views.vector_index.count(nodes_alias(MODEL), being.id) == count


@pytest.mark.parametrize("replay_batch", [2, 100])
def test_a_batch_writes_its_equal_payloads_at_once_and_a_replay_cannot_move_them_back(
    engram: Engram, monkeypatch: pytest.MonkeyPatch, replay_batch: int
) -> None:
    """Status changes of one batch share one payload write, stamped with the batch's last position.
    After a crash between the index write and the view's commit, the view replays the events:
    - in batches of 2, older stamps than the crashed batch wrote: the points it wrote are left alone;
    - in one batch, where two nodes go dying and back to active: their status is written although
      it ends where the batch started (a patch names every field its events changed, or those
      points would keep the crashed batch's `dying`)."""
    from engram.adapters.vectors import EdgeVectorIndex
    from engram.projections import engine
    from engram.projections.vectors import VectorsView

    being, root = _being(engram, "Aria")
    sub = Cluster.create_sub(uuid4(), root, "garden", engram.clock.now())
    nodes = [MemoryNode.create(uuid4(), _scene(i), sub, 0, engram.clock.now()) for i in range(6)]
    for i, node in enumerate(nodes):
        node.embed(_vector(1.0, float(i), 0.5), engram.clock.now())
        node.clear_fresh(engram.clock.now())
    engram.store.save(sub, *nodes)
    engram.views.ensure()
    index = engram.views.vector_index
    assert isinstance(index, EdgeVectorIndex)
    spy = Spy(engram, monkeypatch)
    operations: list[int] = []
    apply = index._apply
    monkeypatch.setattr(index, "_apply", lambda name, ops: (operations.append(len(ops)), apply(name, ops)))

    # Six status changes, one event each: the six payloads are equal, one engine operation writes them.
    for node in nodes:
        node.flag_dying(node.dying_cycle, engram.clock.now())
    flagged = engram.store.save(*nodes)

    def crash(self: VectorsView, batch: engine.Batch, *args: Any) -> None:
        raise RuntimeError("killed after the index write, before the view's commit")

    monkeypatch.setattr(VectorsView, "after_flush", crash)
    with pytest.raises(RuntimeError, match="killed"):
        engram.views.ensure()
    assert [(m, k, sorted(ids)) for m, k, ids in spy.take()] == [
        ("patch_payloads", "nodes", sorted(n.id for n in nodes))
    ]
    assert operations[0] == 1  # then the centroid's deletion (its last active node left)
    for node in nodes:
        payload, _ = _point(engram, being.id, node.id)
        assert (payload["status"], payload["position"]) == (NodeStatus.DYING, flagged)
    monkeypatch.undo()

    # Two nodes come back before the view catches up again.
    back = nodes[:2]
    for node in back:
        node.reactivate(ReactivationSource.RECALL, node.dying_cycle, engram.clock.now())
    head = engram.store.save(*back)
    view = engram.views.vectors_view
    engine.catch_up(engram.views.dbs["vectors"], view, engram.views.source, limit=replay_batch)

    for node in nodes:
        payload, _ = _point(engram, being.id, node.id)
        # The others are left alone by older stamps, or rewritten as they were by the one batch.
        kept = (NodeStatus.DYING, flagged if replay_batch == 2 else head)
        want = (NodeStatus.ACTIVE, head) if node in back else kept
        assert (payload["status"], payload["position"]) == want, node.id
    centroid = _centroid(engram, being.id, sub.id)
    assert centroid is not None
    mean = np.mean([[1.0, float(i), 0.5] for i in range(2)], axis=0)
    assert np.allclose(centroid / np.linalg.norm(centroid), mean / np.linalg.norm(mean), atol=1e-6)


class SqlSpy:
    """Records the statements the memory view's node rows are updated with (`RowCache.write_narrow`)."""

    def __init__(self, engram: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[str] = []
        inner = RowCache.write_narrow
        spy = self

        def recording(cache: RowCache, conn: Any) -> None:
            if cache.spec is not NODES:
                inner(cache, conn)
                return

            class Recording:
                def __getattr__(self, name: str) -> Any:
                    return getattr(conn, name)

                def executemany(self, sql: str, rows: Any) -> None:
                    spy.statements.append(sql)
                    conn.executemany(sql, rows)

            inner(cache, Recording())  # type: ignore[arg-type]

        monkeypatch.setattr(RowCache, "write_narrow", recording)

    def updated_columns(self) -> list[list[str]]:
        """The columns each node UPDATE set, in order; then forgets them."""
        out = [
            [part.split(" = ")[0] for part in sql.split(" SET ")[1].split(" WHERE ")[0].split(", ")]
            for sql in self.statements
            if sql.startswith("UPDATE ") and "nodes" in sql.split(" SET ")[0]
        ]
        self.statements = []
        return out


def test_a_node_row_update_sets_only_the_columns_that_changed(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite rewrites every index on a column an UPDATE sets, changed or not: a reactivation sets the
    4 columns it changes (2 indexed), not all 14 state columns (6 of the table's 8 indexes)."""
    being, root = _being(engram, "Aria")
    node = MemoryNode.create(uuid4(), _scene(1), root, 0, engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    spy = SqlSpy(engram, monkeypatch)

    node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    assert spy.updated_columns() == [["last_activated_at", "reactivation_count", "version", "position"]]

    node.flag_dying(node.dying_cycle, engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    [changed] = spy.updated_columns()
    assert "status" in changed and "last_activated_at" not in changed and "reactivation_count" not in changed

    # What the narrow updates wrote is what the node holds.
    [row] = engram.views.read.nodes(being.id, ids=[node.id])
    assert (row["status"], row["reactivation_count"], row["version"]) == ("dying", 1, node.version)
    assert row["last_activated_at"] == node.last_activated_at.isoformat()


def test_a_row_written_whole_is_no_longer_diffed_against_what_was_read(engram: Engram) -> None:
    """A cache that outlives its batch (a rebuild's) must not diff a later change against a row it has
    since written whole: a value changed back would look unchanged, and never be written."""
    _, root = _being(engram, "Aria")
    node = MemoryNode.create(uuid4(), _scene(1), root, 0, engram.clock.now())
    engram.store.save(node)
    engram.views.ensure()
    db = engram.views.dbs["memory"]
    with db.write() as conn:
        cache = RowCache(NODES, engine.read_tables(conn, db, engram.views.projections["memory"])["nodes"])
        cache.prefetch(conn, [str(node.id)])
        assert cache.read[str(node.id)]["reactivation_count"] == 0
        row = dict(cache.rows[str(node.id)] or {})
        row["reactivation_count"] = 5
        cache.put(row)
        cache.flush(conn)
        assert str(node.id) not in cache.read
        [stored] = conn.query(f"SELECT reactivation_count FROM {cache.physical} WHERE id = ?", [str(node.id)])
        assert stored["reactivation_count"] == 5


def test_a_snapshot_is_taken_from_the_saved_aggregate_without_replaying_it(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root = _being(engram, "Aria")
    node = MemoryNode.create(uuid4(), _scene(1), root, 0, engram.clock.now())
    engram.store.save(node)
    app = engram.store.app
    assert app.snapshots is not None
    replays: list[UUID] = []
    get = app.repository.get

    def counting(aggregate_id: UUID, *args: Any, **kwargs: Any) -> Any:
        replays.append(aggregate_id)
        return get(aggregate_id, *args, **kwargs)

    monkeypatch.setattr(app.repository, "get", counting)
    while node.version < 10:  # one event per save, as reads reactivate
        node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
        engram.store.save(node)
    assert replays == []
    [taken] = app.snapshots.get(node.id, desc=True, limit=1)
    assert taken.originator_version == 10
    # The state the library would have snapshotted: the node replayed from its first 10 events.
    replayed = reduce(lambda agg, event: event.mutate(agg), engram.store.events(node.id, lte=10), None)
    assert _state(taken.mutate(None)) == _state(replayed)
    assert _state(engram.store.get(MemoryNode, node.id)) == _state(node)
