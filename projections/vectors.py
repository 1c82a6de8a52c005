"""The vector projection: node points and cluster centroids in the `VectorIndex`, one set per embedding model.

- Node collection `engram_nodes__<model>`: one point per embedded node, id = node id, payload
  `being_id`, `status`, `cluster_id`, `fresh`, `pinned`, `position`.
- Centroid collection `engram_centroids__<model>`: one point per cluster with active embedded nodes,
  id = cluster id, the mean of those vectors, payload `being_id`, `parent_id`, `is_root`, `count`,
  `position`. The mean comes from a running float64 sum and count per cluster, kept in SQL in the same
  transaction as the tracking position: a node joining or leaving changes one sum, never a recomputation.

A point's `position` is the log position of the last event of the batch that wrote it (its state as
of then), the guard of monotonic writes; the SQL rows keep the position of the event that last changed
them (ADR 0010).

Names are aliases; each generation writes its own collections (`…__g3`), so a rebuild fills new ones and
switches the aliases. Qdrant is written in `before_commit`: the SQL tracking position advances only after
the index acknowledged, and a replay after a crash rewrites the same states (idempotent, monotonic).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import numpy as np
import structlog

from engram.domain.cluster import Cluster
from engram.domain.embedding_models import EmbeddingModels
from engram.domain.node import MemoryNode, NodeStatus
from engram.projections.engine import Batch, Projection, handles
from engram.projections.model_switch import drop_other_models, rows_of_other_models
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import Index, TableSpec
from engram.projections.vector_index import PayloadPatch, SearchFilter, VectorIndex, VectorPoint

log = structlog.get_logger("engram.projections.vectors")

VECTOR_NODES = TableSpec(
    name="vector_nodes",
    columns={
        "id": "id",
        "being_id": "id",
        "cluster_id": "id",
        "status": "text",
        "fresh": "bool",
        "pinned": "bool",
        "model": "text",
        "vector": "blob",  # float32, little-endian
        "position": "int",
    },
    indexes=(Index("being", ("being_id", "cluster_id")),),
    # A row whose vector this batch left alone gets an UPDATE of these small columns, not an upsert
    # of the vector too; `cluster_id` (indexed) only when it moved.
    narrow=("cluster_id", "status", "fresh", "pinned", "position"),
)

VECTOR_CLUSTERS = TableSpec(
    name="vector_clusters",
    columns={"id": "id", "being_id": "id", "parent_id": "id", "is_root": "bool", "position": "int"},
)

CENTROIDS = TableSpec(
    name="centroids",
    columns={
        "id": "text",  # cluster id + ":" + model
        "cluster_id": "id",
        "being_id": "id",
        "model": "text",
        "dim": "int",
        "sum": "blob",  # float64 running sum of the active nodes' vectors
        "count": "int",
        "position": "int",
    },
    indexes=(Index("cluster", ("cluster_id",)),),
)

COLLECTIONS = TableSpec(
    name="collections", columns={"id": "text", "kind": "text", "model": "text", "dim": "int"}
)


def model_slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")


def nodes_alias(model: str) -> str:
    return f"engram_nodes__{model_slug(model)}"


def centroids_alias(model: str) -> str:
    return f"engram_centroids__{model_slug(model)}"


_STATE = ("cluster_id", "status", "fresh", "pinned", "model", "vector")
"""A node row's fields that a point or a centroid depends on (`position` aside)."""

_PAYLOAD_STATE = ("cluster_id", "status", "fresh", "pinned")
"""A node row's fields that its point's payload holds and events change (`being_id` never changes)."""

_NEW_VECTOR = "_new_vector"
_CHANGED = "_changed"

_MOVES_A_VECTOR: dict[str, tuple[type, ...]] = {
    NodeStatus.ACTIVE: (
        MemoryNode.Embedded,
        MemoryNode.MovedToCluster,
        MemoryNode.FlaggedDying,
        MemoryNode.MadeDead,
        MemoryNode.Absorbed,
    ),
    NodeStatus.DYING: (MemoryNode.Pinned, MemoryNode.Reactivated),
    NodeStatus.DEAD: (MemoryNode.Revived, MemoryNode.Unabsorbed),
}
"""Node events that add a vector to a centroid or take it out, by the node's status before the event."""


def _may_move_vector(event: Any, status: str) -> bool:
    return isinstance(event, _MOVES_A_VECTOR.get(status, ()))


def _f32(blob: bytes) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


_GENERATION_COLLECTION = re.compile(r"^engram_(nodes|centroids)__([a-z0-9_]+)__g([0-9]+)$")
"""The name of a collection a generation writes (`VectorsView._collection`)."""


class VectorsView(Projection):
    name = "vectors"
    schema_version = 1
    tables = (VECTOR_NODES, VECTOR_CLUSTERS, CENTROIDS, COLLECTIONS)

    def __init__(self, index_factory: Callable[[], VectorIndex]) -> None:
        self._factory = index_factory
        self._index: VectorIndex | None = None
        self._opening = threading.Lock()
        self.searches = Searches()
        """The searches running on the index (`VectorQueries`): old collections go once they are done."""

    @property
    def index(self) -> VectorIndex:
        if self._index is None:
            with self._opening:  # threads of a server ask at once; one index per process (Edge)
                if self._index is None:
                    self._index = self._factory()
        return self._index

    def close(self) -> None:
        """Close the index, if it was opened."""
        if self._index is not None:
            self._index.close()

    # -- batch plumbing -------------------------------------------------------------------------

    def prefetch(self, batch: Batch, events: Any) -> None:
        node_ids = [str(e.originator_id) for e in events if isinstance(e, MemoryNode.Event)]
        batch.vector_nodes.prefetch(batch.conn, node_ids)
        # Clusters and centroids only where an event may move a vector in or out of a centroid: most
        # small batches (reads reactivating active nodes) touch none, and a miss still loads on use.
        cluster_ids = [str(e.originator_id) for e in events if isinstance(e, Cluster.Event)]
        models: set[str] = set()
        for e in events:
            if isinstance(e, MemoryNode.Created | MemoryNode.MovedToCluster):
                cluster_ids.append(str(e.cluster_id))
            if isinstance(e, MemoryNode.Embedded):
                models.add(e.embedding.model)
            row = batch.vector_nodes.rows.get(str(e.originator_id))
            if row is not None and _may_move_vector(e, row["status"]):
                cluster_ids.append(str(row["cluster_id"]))
                if row["model"]:
                    models.add(row["model"])
        if cluster_ids:
            batch.vector_clusters.prefetch(batch.conn, cluster_ids)
            batch.centroids.prefetch(batch.conn, [f"{c}:{m}" for c in cluster_ids for m in models])

    def _contribution(self, row: Mapping[str, Any] | None) -> tuple[str, str] | None:
        """(cluster, model) whose centroid this node counts in, or None."""
        if row is None or row["vector"] is None or row["status"] != NodeStatus.ACTIVE:
            return None
        return row["cluster_id"], row["model"]

    def _adjust(self, batch: Batch, key: tuple[str, str], vector: np.ndarray[Any, Any], sign: int) -> None:
        cluster_id, model = key
        cid = f"{cluster_id}:{model}"
        row = batch.centroids.get(batch.conn, cid)
        if row is None:
            cluster = batch.vector_clusters.get(batch.conn, cluster_id)
            if cluster is None:
                return
            row = {
                "id": cid,
                "cluster_id": cluster_id,
                "being_id": cluster["being_id"],
                "model": model,
                "dim": len(vector),
                "sum": np.zeros(len(vector), dtype="<f8").tobytes(),
                "count": 0,
            }
        total = np.frombuffer(row["sum"], dtype="<f8") + sign * vector.astype("<f8")
        row["sum"] = total.astype("<f8").tobytes()
        row["count"] += sign
        row["position"] = batch.position
        batch.centroids.put(row)

    def _change(self, batch: Batch, event: Any, change: Callable[[dict[str, Any]], None]) -> None:
        row = batch.vector_nodes.get(batch.conn, str(event.originator_id))
        if row is None:
            raise LookupError(
                f"vectors view: event {type(event).__qualname__} for unknown node {event.originator_id}"
            )
        was = {k: row[k] for k in _STATE}
        change(row)
        if all(row[k] == was[k] for k in _STATE):
            # Nothing a point or a centroid holds changed (e.g. a read reactivating an active node):
            # neither the row nor the index is written. The point keeps the position of the last event
            # that changed it, live and rebuilt alike, and a later change carries a greater one.
            return
        before, after = self._contribution(was), self._contribution(row)
        if before != after or was["vector"] != row["vector"]:
            if before is not None:
                self._adjust(batch, before, _f32(was["vector"]), -1)
            if after is not None:
                self._adjust(batch, after, _f32(row["vector"]), +1)
        # Not a column: the payload fields this batch's events changed, which are all that a point
        # written by an earlier batch needs (see `before_commit`).
        changed: set[str] | None = row.get(_CHANGED)
        if changed is None:
            changed = row[_CHANGED] = set()
        changed.update(k for k in _PAYLOAD_STATE if row[k] != was[k])
        row["position"] = batch.position
        batch.vector_nodes.put(row, whole=_NEW_VECTOR in row)

    # -- handlers -------------------------------------------------------------------------------

    @handles(Cluster.Created)
    def _cluster_created(self, batch: Batch, e: Cluster.Created) -> None:
        batch.vector_clusters.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "parent_id": str(e.parent_id or e.originator_id),
                "is_root": e.is_root,
                "position": batch.position,
            }
        )

    @handles(Cluster.MergeUndone)
    def _cluster_merge_undone(self, batch: Batch, e: Cluster.MergeUndone) -> None:
        # Alive again (ADR 0078): the centroids come back as its nodes are moved back into it.
        batch.vector_clusters.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "parent_id": str(e.parent_id),
                "is_root": False,
                "position": batch.position,
            }
        )

    @handles(Cluster.Deleted, Cluster.SplitUndone)
    def _cluster_deleted(self, batch: Batch, e: Cluster.Deleted) -> None:
        batch.vector_clusters.delete(str(e.originator_id))
        for key, row in list(batch.centroids.rows.items()):
            if row is not None and row["cluster_id"] == str(e.originator_id):
                batch.centroids.delete(key)
        for row in batch.conn.query(
            f"SELECT id FROM {batch.centroids.physical} WHERE cluster_id = ?", [str(e.originator_id)]
        ):
            batch.centroids.delete(row["id"])

    @handles(EmbeddingModels.Switched)
    def _switched(self, batch: Batch, e: EmbeddingModels.Switched) -> None:
        # Every vector is of `e.model` now (ADR 0071): the other models' centroids (counts of zero by
        # then) and collections go. Searches begun on them finish first.
        for row in rows_of_other_models(batch, batch.centroids, e.model):
            batch.centroids.delete(row["id"])
        if batch.active and not self.searches.drain(DRAIN_TIMEOUT_S):
            log.warning("dropping the vector collections of a replaced model while searches still run")
        drop_other_models(
            batch,
            batch.collections,
            e.model,
            self.index,
            lambda r: f"engram_{r['kind']}__{model_slug(r['model'])}__g{batch.generation}",
        )

    @handles(MemoryNode.Created)
    def _created(self, batch: Batch, e: MemoryNode.Created) -> None:
        batch.vector_nodes.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "cluster_id": str(e.cluster_id),
                "status": NodeStatus.ACTIVE.value,
                "fresh": True,
                "pinned": False,
                "model": None,
                "vector": None,
                "position": batch.position,
            },
            whole=True,
        )

    @handles(MemoryNode.Embedded, MemoryNode.Reembedded)
    def _embedded(self, batch: Batch, e: MemoryNode.Embedded) -> None:
        def change(row: dict[str, Any]) -> None:
            # `_change` takes a replaced vector out of its centroid and puts the new one in.
            row["model"] = e.embedding.model
            row["vector"] = e.embedding.data
            # Not a column (flush writes only the spec's columns): tells `before_commit` that this
            # batch gave the point a vector, so the whole point is written, not only its payload
            # (and the whole row, vector included).
            row[_NEW_VECTOR] = True

        self._change(batch, e, change)

    @handles(MemoryNode.MovedToCluster, MemoryNode.MovedByUndo)
    def _moved(self, batch: Batch, e: MemoryNode.MovedToCluster) -> None:
        self._change(batch, e, lambda r: r.update(cluster_id=str(e.cluster_id)))

    @handles(MemoryNode.Pinned)
    def _pinned(self, batch: Batch, e: MemoryNode.Pinned) -> None:
        def change(r: dict[str, Any]) -> None:
            r["pinned"] = True
            if r["status"] == NodeStatus.DYING:
                r["status"] = NodeStatus.ACTIVE.value

        self._change(batch, e, change)

    @handles(MemoryNode.Unpinned)
    def _unpinned(self, batch: Batch, e: MemoryNode.Unpinned) -> None:
        self._change(batch, e, lambda r: r.update(pinned=False))

    @handles(MemoryNode.FlaggedDying)
    def _dying(self, batch: Batch, e: MemoryNode.FlaggedDying) -> None:
        self._change(batch, e, lambda r: r.update(status=NodeStatus.DYING.value))

    @handles(MemoryNode.MadeDead, MemoryNode.Absorbed)
    def _dead(self, batch: Batch, e: Any) -> None:
        self._change(
            batch,
            e,
            lambda r: r.update(
                status=NodeStatus.DEAD.value,
                fresh=False if isinstance(e, MemoryNode.Absorbed) else r["fresh"],
            ),
        )

    @handles(MemoryNode.AbsorbedNodes, MemoryNode.FreshnessCleared)
    def _unfresh(self, batch: Batch, e: Any) -> None:
        self._change(batch, e, lambda r: r.update(fresh=False))

    @handles(MemoryNode.Reactivated)
    def _reactivated(self, batch: Batch, e: MemoryNode.Reactivated) -> None:
        def change(r: dict[str, Any]) -> None:
            if r["status"] == NodeStatus.DYING:
                r["status"] = NodeStatus.ACTIVE.value

        self._change(batch, e, change)

    @handles(MemoryNode.Revived)
    def _revived(self, batch: Batch, e: MemoryNode.Revived) -> None:
        self._change(batch, e, lambda r: r.update(status=NodeStatus.ACTIVE.value))

    @handles(MemoryNode.Unabsorbed)
    def _unabsorbed(self, batch: Batch, e: MemoryNode.Unabsorbed) -> None:
        self._change(batch, e, lambda r: r.update(status=e.status, fresh=e.fresh))

    # -- writing to the index -------------------------------------------------------------------

    def _collection(self, batch: Batch, kind: str, model: str, dim: int) -> str:
        """The collection of this generation for (kind, model), created on first use.

        A model's node and centroid collections are created together: which collections exist then
        depends only on the model having vectors, never on where batches cut the log (a centroid that
        exists only between two events of one rebuild batch would otherwise leave live and rebuilt
        views with different collections).
        """
        if batch.collections.get(batch.conn, f"{kind}:{model}") is None:
            for each in ("nodes", "centroids"):
                if batch.collections.get(batch.conn, f"{each}:{model}") is None:
                    created = f"engram_{each}__{model_slug(model)}__g{batch.generation}"
                    self.index.ensure_collection(created, dim)
                    batch.collections.put({"id": f"{each}:{model}", "kind": each, "model": model, "dim": dim})
                    if batch.active:
                        self.index.set_alias(_alias(each, model), created)
        return f"engram_{kind}__{model_slug(model)}__g{batch.generation}"

    def before_commit(self, batch: Batch) -> None:
        # Every point this batch writes holds its state as of the batch's last event, so it is stamped
        # with that event's position (not with the position of the event that last changed it): a
        # valid monotonic guard, and one that lets the index write all the points that get the same
        # fields (a patrol step's status changes) with one operation instead of one per point.
        stamp = batch.position
        points: dict[str, list[VectorPoint]] = {}
        patches: dict[str, dict[tuple[tuple[str, Any], ...], list[UUID]]] = {}
        collections: dict[str, tuple[str, bool]] = {}  # model: (its node collection, known before)
        for key in batch.vector_nodes.dirty:
            row = batch.vector_nodes.rows[key]
            if row is None:
                continue
            changed = row.pop(_CHANGED, ())
            if row["vector"] is None:
                continue
            found = collections.get(row["model"])
            if found is None:
                known = batch.collections.get(batch.conn, f"nodes:{row['model']}") is not None
                name = self._collection(batch, "nodes", row["model"], len(row["vector"]) // 4)
                found = collections[row["model"]] = (name, known)
            name, known = found
            if row.get(_NEW_VECTOR) or not known:
                payload = {k: row[k] for k in ("being_id", *_PAYLOAD_STATE)}
                payload["position"] = stamp
                points.setdefault(name, []).append(VectorPoint(UUID(row["id"]), _f32(row["vector"]), payload))
            elif changed:
                # The point was written with this vector by an earlier batch (the view's tracking
                # position only advances after the index acknowledged): only the payload fields this
                # batch's events changed are written, and the points that get the same ones share
                # one patch (a patrol step's status changes: one engine operation, not one a node).
                # Every other field still holds what the point's last write gave it, or a replay's
                # newer state; ADR 0010 shows why a patch then leaves the point as of `stamp`.
                fields = tuple((k, row[k]) for k in _PAYLOAD_STATE if k in changed)
                patches.setdefault(name, {}).setdefault(fields, []).append(UUID(row["id"]))
        removed: dict[str, list[UUID]] = {}
        for key in batch.centroids.dirty:
            row = batch.centroids.rows[key]
            cluster_id, model = key.split(":", 1)
            if row is None or row["count"] <= 0:
                existing = batch.collections.get(batch.conn, f"centroids:{model}")
                if existing is not None:
                    name = f"engram_centroids__{model_slug(model)}__g{batch.generation}"
                    removed.setdefault(name, []).append(UUID(cluster_id))
                continue
            cluster = batch.vector_clusters.get(batch.conn, cluster_id)
            if cluster is None:
                continue
            mean = (np.frombuffer(row["sum"], dtype="<f8") / row["count"]).astype(np.float32)
            name = self._collection(batch, "centroids", model, len(mean))
            payload = {
                "being_id": row["being_id"],
                "cluster_id": cluster_id,
                "parent_id": cluster["parent_id"],
                "is_root": cluster["is_root"],
                "count": row["count"],
                "position": stamp,
            }
            points.setdefault(name, []).append(VectorPoint(UUID(cluster_id), mean, payload))
        for name, batch_points in points.items():
            self.index.upsert(name, batch_points)
        for name, groups in patches.items():
            self.index.patch_payloads(
                name, [PayloadPatch(ids, dict(fields), stamp) for fields, ids in groups.items()]
            )
        for name, ids in removed.items():
            self.index.delete(name, ids)

    def after_switch(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        for row in conn.query(f"SELECT * FROM {db.table('collections', generation)}"):
            name = f"engram_{row['kind']}__{model_slug(row['model'])}__g{generation}"
            self.index.set_alias(_alias(row["kind"], row["model"]), name)

    def drop_generation_extras(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        try:
            rows = conn.query(f"SELECT * FROM {db.table('collections', generation)}")
        except Exception:  # the generation never got as far as creating its tables
            return
        if rows and not self.searches.drain(DRAIN_TIMEOUT_S):
            log.warning("dropping old vector collections while searches still run", generation=generation)
        for row in rows:
            self.index.drop_collection(f"engram_{row['kind']}__{model_slug(row['model'])}__g{generation}")

    def drop_stray_extras(self, keep: int) -> list[str]:
        """Drop the collections of generations other than `keep`, recorded or not (a rebuild killed
        between creating one and committing its record leaves it unrecorded), except one an alias
        points at: that one serves searches."""
        dropped = []
        for name in self.index.list_collections():
            found = _GENERATION_COLLECTION.match(name)
            if found is None or int(found.group(3)) == keep:
                continue
            if self.index.resolve_alias(f"engram_{found.group(1)}__{found.group(2)}") == name:
                continue
            self.index.drop_collection(name)
            dropped.append(name)
        return dropped


def _alias(kind: str, model: str) -> str:
    return nodes_alias(model) if kind == "nodes" else centroids_alias(model)


DRAIN_TIMEOUT_S = 30.0


class Searches:
    """The searches running on one index. A search resolves an alias, then queries the collection
    behind it; after a rebuild's switch, the old collections are dropped only once the searches that
    may have resolved them (those begun before the drop) are done."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._epoch = 0
        self._running: Counter[int] = Counter()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._cond:
            epoch = self._epoch
            self._running[epoch] += 1
        try:
            yield
        finally:
            with self._cond:
                self._running[epoch] -= 1
                if not self._running[epoch]:
                    del self._running[epoch]
                self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait for the searches begun before this call (not for later ones); False on timeout."""
        with self._cond:
            self._epoch += 1
            cutoff = self._epoch
            return self._cond.wait_for(lambda: all(e >= cutoff for e in self._running), timeout)


class VectorQueries:
    """Searches on the vector collections; every one is scoped to a being. `searches`: the view's
    record of the searches running (`VectorsView.searches`), which dropping a generation waits for."""

    def __init__(self, index: VectorIndex, searches: Searches) -> None:
        self.index = index
        self._searches = searches

    def similar_nodes(
        self,
        being_id: UUID,
        model: str,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        limit: int,
        *,
        statuses: Sequence[str] | None = None,
        cluster_ids: Sequence[str] | None = None,
        exclude: Sequence[UUID] = (),
        threshold: float | None = None,
    ) -> list[tuple[UUID, float]]:
        alias = nodes_alias(model)
        where = SearchFilter(
            statuses=frozenset(statuses) if statuses else None,
            cluster_ids=frozenset(cluster_ids) if cluster_ids else None,
            exclude_ids=frozenset(exclude),
        )
        with self._searches.running():
            if self.index.resolve_alias(alias) is None:
                return []
            hits = self.index.search(
                alias, being_id, vector, limit, where=where, score_threshold=threshold, with_payload=False
            )
        return [(h.id, h.score) for h in hits]

    def similar_clusters(
        self,
        being_id: UUID,
        model: str,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        limit: int,
        *,
        exclude: Sequence[UUID] = (),
        threshold: float | None = None,
    ) -> list[tuple[UUID, float, dict[str, Any]]]:
        alias = centroids_alias(model)
        where = SearchFilter(exclude_ids=frozenset(exclude))
        with self._searches.running():
            if self.index.resolve_alias(alias) is None:
                return []
            hits = self.index.search(alias, being_id, vector, limit, where=where, score_threshold=threshold)
        return [(h.id, h.score, dict(h.payload)) for h in hits]

    def centroid(
        self, being_id: UUID, model: str, cluster_id: UUID
    ) -> np.ndarray[Any, np.dtype[np.float32]] | None:
        return self.centroids(being_id, model, [cluster_id]).get(cluster_id)

    def centroids(
        self, being_id: UUID, model: str, cluster_ids: Sequence[UUID]
    ) -> dict[UUID, np.ndarray[Any, np.dtype[np.float32]]]:
        """The centroids of those of `cluster_ids` that have one (active embedded nodes), in one read."""
        alias = centroids_alias(model)
        with self._searches.running():
            if not cluster_ids or self.index.resolve_alias(alias) is None:
                return {}
            found = self.index.retrieve(alias, being_id, list(cluster_ids), with_vectors=True)
        return {UUID(str(p.id)): p.vector for p in found if p.vector is not None}


__all__ = ["VectorQueries", "VectorsView", "centroids_alias", "model_slug", "nodes_alias"]
