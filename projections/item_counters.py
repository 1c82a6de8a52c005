"""What an erased node leaves in the counters of the views it counted in (ADR 0089), taken out in
place before its rows are deleted (`services/erasure_purge.py::ViewPurge.purge_items`).

A node counts only where it stands now: in its cluster's `active_count` (when active) and
`total_count` (memory view), and in its cluster's centroid (vectors view: the running float64 sum
and count of its active embedded nodes). A rebuild without the node's events gives the counters
less exactly that contribution, so subtracting it gives what a rebuild gives (the `position` a
centroid row was last moved at stays: it is not a count). A centroid's point is written again with
its new mean, or removed when no node is left in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np

from engram.domain.node import NodeStatus
from engram.projections.sql import ViewConnection, ViewDatabase, chunks
from engram.projections.tables import MAX_IN_LIST
from engram.projections.vector_index import VectorIndex, VectorPoint
from engram.projections.vectors import model_slug


def _rows(
    conn: ViewConnection, table: str, being_id: UUID, ids: Sequence[UUID], columns: str
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in chunks([str(i) for i in ids], MAX_IN_LIST):
        marks = ", ".join("?" for _ in part)
        out += conn.query(
            f"SELECT {columns} FROM {table} WHERE being_id = ? AND id IN ({marks})", [str(being_id), *part]
        )
    return out


def uncount_clusters(
    conn: ViewConnection, db: ViewDatabase, generation: int, being_id: UUID, node_ids: Sequence[UUID]
) -> int:
    """Take the erased nodes out of their clusters' counts; how many clusters changed."""
    nodes, clusters = db.table("nodes", generation), db.table("clusters", generation)
    by_cluster: dict[str, list[int]] = {}
    for row in _rows(conn, nodes, being_id, node_ids, "cluster_id, status"):
        if row["cluster_id"] is None:
            continue
        counts = by_cluster.setdefault(str(row["cluster_id"]), [0, 0])
        counts[0] += row["status"] == NodeStatus.ACTIVE
        counts[1] += 1
    for cluster_id, (active, total) in by_cluster.items():
        conn.execute(
            f"UPDATE {clusters} SET active_count = active_count - ?, total_count = total_count - ? "
            "WHERE id = ?",
            [active, total, cluster_id],
        )
    return len(by_cluster)


def uncount_centroids(
    conn: ViewConnection,
    db: ViewDatabase,
    generation: int,
    being_id: UUID,
    node_ids: Sequence[UUID],
    index: VectorIndex,
) -> int:
    """Take the erased nodes' vectors out of their clusters' centroids, and write the centroids'
    points again (or remove them); how many centroids changed."""
    vector_nodes = db.table("vector_nodes", generation)
    centroids = db.table("centroids", generation)
    vector_clusters = db.table("vector_clusters", generation)
    moved: dict[str, tuple[np.ndarray[Any, Any], int]] = {}
    columns = "cluster_id, status, model, vector"
    for row in _rows(conn, vector_nodes, being_id, node_ids, columns):
        if row["vector"] is None or row["status"] != NodeStatus.ACTIVE or row["cluster_id"] is None:
            continue  # counted in no centroid (`VectorsView._contribution`)
        key = f"{row['cluster_id']}:{row['model']}"
        vector = np.frombuffer(bytes(row["vector"]), dtype="<f4").astype("<f8")
        total, n = moved.get(key, (np.zeros(len(vector), dtype="<f8"), 0))
        moved[key] = (total + vector, n + 1)
    for key, (removed, n) in moved.items():
        centroid = conn.query_one(f"SELECT * FROM {centroids} WHERE id = ?", [key])
        if centroid is None:
            continue
        # float64 sums of float32 vectors: exact while a cluster's vectors' magnitudes stay within
        # 2^29 of each other, so the sum less these equals the sum a rebuild adds up (ADR 0089).
        total = np.frombuffer(bytes(centroid["sum"]), dtype="<f8") - removed
        count = int(centroid["count"]) - n
        conn.execute(
            f"UPDATE {centroids} SET sum = ?, count = ? WHERE id = ?",
            [total.astype("<f8").tobytes(), count, key],
        )
        cluster_id, model = key.split(":", 1)
        name = f"engram_centroids__{model_slug(model)}__g{generation}"
        if not index.collection_exists(name):
            continue
        if count <= 0:
            index.delete(name, [UUID(cluster_id)])
            continue
        cluster = conn.query_one(
            f"SELECT parent_id, is_root FROM {vector_clusters} WHERE id = ?", [cluster_id]
        )
        if cluster is None:
            continue
        mean = (total / count).astype(np.float32)
        payload = {
            "being_id": str(centroid["being_id"]),
            "cluster_id": cluster_id,
            "parent_id": cluster["parent_id"],
            "is_root": cluster["is_root"],
            "count": count,
            "position": int(centroid["position"]),
        }
        index.upsert(name, [VectorPoint(UUID(cluster_id), mean, payload)])
    return len(moved)
