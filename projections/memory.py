"""The memory view: nodes and clusters, with the indexes patrol and recall need.

`nodes.dying_cycle` is the being cycle at which the node's effective importance
falls to 0.05 (`domain.decay.dying_cycle`); with the index on
(being_id, status, pinned, dying_cycle) patrol finds the nodes to flag in
O(transitions). Cluster counts are kept here, in the same transaction as the
node rows, so they never disagree.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from engram.domain import decay
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode, NodeStatus
from engram.projections.engine import Batch, Projection, handles
from engram.projections.fulltext.port import FullTextIndex
from engram.projections.notes import utc_text
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import Index, TableSpec

NODES = TableSpec(
    name="nodes",
    columns={
        "id": "id",
        "being_id": "id",
        "cluster_id": "id",
        "status": "text",
        "fresh": "bool",
        "pinned": "bool",
        "importance": "float",
        "dying_cycle": "int",
        "last_activated_at": "text",
        "last_activated_cycle": "int",
        "reactivation_count": "int",
        "read_since_death": "bool",
        "absorbed_into": "id",
        "action": "text",
        "feeling": "text",
        "setting": "text",
        "actors": "text",  # space-joined, for full-text search
        "dialogue": "text",  # newline-joined, for full-text search
        "themes": "text",  # JSON array
        "when_json": "text",  # JSON array, searched as text (spec: scene->>when ilike)
        "scene_json": "text",
        "emotion_json": "text",
        "source_note_id": "id",
        "source_ref": "text",
        "embedding_model": "text",
        "created_at": "text",
        "seq": "int",  # log position of `Created`: a being's nodes in the order they were noted (ADR 0008)
        # ADR 0046: its notes' latest expiry (`utc_text`; None: never) and sensitivity. Reads leave out
        # a node past `expires_at` (compared with their own now) or sensitive.
        "expires_at": "text",
        "sensitive": "bool",
        "version": "int",
        "position": "int",
    },
    indexes=(
        Index("decay", ("being_id", "status", "pinned", "dying_cycle")),
        Index("revive", ("being_id", "status", "read_since_death", "dying_cycle")),
        Index("cluster", ("cluster_id", "status")),
        Index("recent", ("being_id", "last_activated_at")),
        Index("fresh", ("being_id", "fresh")),
        Index("source", ("being_id", "source_ref")),
        Index("sequence", ("being_id", "seq")),
        Index("changes", ("being_id", "position")),  # what changed since a position (ranking cache)
        # The nodes reads leave out (`ReadModels.hidden_nodes`): few, so a read finds them in O(hidden).
        Index("hidden", ("being_id", "expires_at"), where="sensitive OR expires_at IS NOT NULL"),
    ),
    # What events after `Created` change, except `AbsorbedNodes` (it rewrites the scene: a whole row).
    # A reactivation then rewrites 2 of the table's 8 indexes (`recent`, `changes`), not 6, and the
    # full-text index is left alone.
    narrow=(
        "cluster_id",
        "status",
        "fresh",
        "pinned",
        "importance",
        "dying_cycle",
        "last_activated_at",
        "last_activated_cycle",
        "reactivation_count",
        "read_since_death",
        "absorbed_into",
        "embedding_model",
        "version",
        "position",
    ),
)

CLUSTERS = TableSpec(
    name="clusters",
    columns={
        "id": "id",
        "being_id": "id",
        "name": "text",
        "parent_id": "id",
        "is_root": "bool",
        "active_count": "int",
        "total_count": "int",
        "created_at": "text",
        "version": "int",
        "position": "int",
    },
    indexes=(
        Index("being", ("being_id", "parent_id")),
        Index("small", ("being_id", "is_root", "active_count")),
    ),
)


_dying_cycle = functools.lru_cache(maxsize=4096)(decay.dying_cycle)
"""Every node event recomputes it, from few distinct (importance, cycle) pairs: a pure function, cached."""

_to_json = json.JSONEncoder(ensure_ascii=False).encode
"""`json.dumps(..., ensure_ascii=False)` without building an encoder per call (three per new node)."""


def _when(scene: dict[str, Any]) -> str:
    return _to_json(scene.get("when", []))


class MemoryView(Projection):
    name = "memory"
    # 2: full-text index; 3: `seq` for neighbouring memories; 4: a full-text table per being (ADR 0012);
    # 5: names marked in the full-text index (ADR 0014); 6: the (being_id, position) index (ADR 0015);
    # 7: expiry and sensitivity (ADR 0046)
    schema_version = 7
    tables = (NODES, CLUSTERS)

    def __init__(self, fulltext: FullTextIndex) -> None:
        self.fulltext = fulltext
        """The store's own full-text index over the nodes, kept here in the view's transactions."""

    def create_indexes(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """The indexes, plus the full-text index over the nodes.

        A rebuild calls this after its bulk load: the full-text index is then built once over the rows
        instead of being updated for every write.
        """
        super().create_indexes(db, conn, generation)
        self.fulltext.create(conn, db.table("nodes", generation))

    def drop_schema(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        self.fulltext.drop(conn, db.table("nodes", generation))
        super().drop_schema(db, conn, generation)

    def prefetch(self, batch: Batch, events: Any) -> None:
        node_ids = [str(e.originator_id) for e in events if isinstance(e, MemoryNode.Event)]
        node_ids += [
            str(i) for e in events if isinstance(e, MemoryNode.AbsorbedNodes) for i in e.absorbed_ids
        ]
        batch.nodes.prefetch(batch.conn, node_ids)
        cluster_ids = [str(e.originator_id) for e in events if isinstance(e, Cluster.Event)]
        cluster_ids += [
            str(e.cluster_id) for e in events if isinstance(e, MemoryNode.Created | MemoryNode.MovedToCluster)
        ]
        cluster_ids += [str(r["cluster_id"]) for r in batch.nodes.rows.values() if r is not None]
        batch.clusters.prefetch(batch.conn, cluster_ids)

    def before_commit(self, batch: Batch) -> None:
        """SQLite: take the stored text of the rows about to be written whole (new ones, rewritten
        scenes) out of their beings' full-text tables (`after_flush` indexes what replaces it). Rows
        changed in their state columns only are narrow updates (`NODES.narrow`) and never get here."""
        nodes = batch.nodes
        if not nodes.dirty:
            return
        keys = nodes.whole_keys()
        if not keys:
            return
        stored = not (nodes.complete and nodes.stored.isdisjoint(keys))  # else a rebuild's new rows
        indexed = self.fulltext.forget(batch.conn, nodes.physical, keys, stored=stored)
        if indexed:
            batch.scratch["fts_keys"] = indexed

    def after_flush(self, batch: Batch) -> None:
        """Index the rows written whole (new ones, rewritten scenes), as `before_commit` asked."""
        keys = batch.scratch.get("fts_keys")
        if keys:
            self.fulltext.index(batch.conn, batch.nodes.physical, keys)

    # -- helpers ------------------------------------------------------------------------------

    def _node(self, batch: Batch, event: Any) -> dict[str, Any]:
        row = batch.nodes.get(batch.conn, str(event.originator_id))
        if row is None:
            raise LookupError(
                f"memory view: event {type(event).__qualname__} for unknown node {event.originator_id}"
            )
        return row

    def _count(self, batch: Batch, cluster_id: str | None, *, active: int = 0, total: int = 0) -> None:
        if cluster_id is None:
            return
        cluster = batch.clusters.get(batch.conn, cluster_id)
        if cluster is not None:
            cluster["active_count"] += active
            cluster["total_count"] += total
            batch.clusters.put(cluster)

    def _save(self, batch: Batch, row: dict[str, Any], event: Any, *, whole: bool = False) -> None:
        """`whole`: a new row, or one changed outside `NODES.narrow` (written whole, text included)."""
        row["version"] = event.originator_version
        row["position"] = batch.position
        row["dying_cycle"] = _dying_cycle(row["importance"], row["last_activated_cycle"])
        batch.nodes.put(row, whole=whole)

    def _set_status(self, batch: Batch, row: dict[str, Any], status: str) -> None:
        was_active = row["status"] == NodeStatus.ACTIVE
        is_active = status == NodeStatus.ACTIVE
        if was_active != is_active:
            self._count(batch, row["cluster_id"], active=1 if is_active else -1)
        row["status"] = status

    # -- clusters -----------------------------------------------------------------------------

    @handles(Cluster.Created)
    def _cluster_created(self, batch: Batch, e: Cluster.Created) -> None:
        batch.clusters.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "name": e.name,
                "parent_id": str(e.parent_id if e.parent_id is not None else e.originator_id),
                "is_root": e.is_root,
                "active_count": 0,
                "total_count": 0,
                "created_at": e.timestamp.isoformat(),
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(Cluster.MergeUndone)
    def _cluster_merge_undone(self, batch: Batch, e: Cluster.MergeUndone) -> None:
        # The row a merge deleted, made again from the event (ADR 0078); its nodes come back after it.
        batch.clusters.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "name": e.name,
                "parent_id": str(e.parent_id),
                "is_root": False,
                "active_count": 0,
                "total_count": 0,
                "created_at": e.created_at.isoformat(),
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(Cluster.Renamed)
    def _cluster_renamed(self, batch: Batch, e: Cluster.Renamed) -> None:
        row = batch.clusters.get(batch.conn, str(e.originator_id))
        if row is not None:
            row.update(name=e.name, version=e.originator_version, position=batch.position)
            batch.clusters.put(row)

    @handles(Cluster.Deleted, Cluster.SplitUndone)
    def _cluster_deleted(self, batch: Batch, e: Cluster.Deleted) -> None:
        batch.clusters.delete(str(e.originator_id))

    # -- nodes --------------------------------------------------------------------------------

    @handles(MemoryNode.Created)
    def _node_created(self, batch: Batch, e: MemoryNode.Created) -> None:
        at = e.timestamp.isoformat()
        row = {
            "id": str(e.originator_id),
            "being_id": str(e.being_id),
            "cluster_id": str(e.cluster_id),
            "status": NodeStatus.ACTIVE.value,
            "fresh": True,
            "pinned": False,
            "importance": e.importance,
            "last_activated_at": at,
            "last_activated_cycle": e.activation_cycle,
            "reactivation_count": 0,
            "read_since_death": False,
            "absorbed_into": None,
            "action": e.scene.get("action", ""),
            "feeling": e.feeling,
            "setting": e.scene.get("setting"),
            "actors": " ".join(e.scene.get("actors", [])),
            "dialogue": "\n".join(e.scene.get("dialogue") or []),
            "themes": _to_json(e.themes),
            "when_json": _when(e.scene),
            "scene_json": _to_json(e.scene),
            "emotion_json": json.dumps(e.emotion) if e.emotion is not None else None,
            "source_note_id": str(e.source_note_id) if e.source_note_id else None,
            "source_ref": e.source_ref,
            "embedding_model": None,
            "created_at": at,
            "seq": batch.position,
            "expires_at": utc_text(e.expires_at) if e.expires_at is not None else None,
            "sensitive": e.sensitive,
        }
        self._count(batch, row["cluster_id"], active=1, total=1)
        self._save(batch, row, e, whole=True)

    @handles(MemoryNode.Embedded)
    def _embedded(self, batch: Batch, e: MemoryNode.Embedded) -> None:
        row = self._node(batch, e)
        row["embedding_model"] = e.embedding.model
        self._save(batch, row, e)

    @handles(MemoryNode.MovedToCluster, MemoryNode.MovedByUndo)
    def _moved(self, batch: Batch, e: MemoryNode.MovedToCluster) -> None:
        row = self._node(batch, e)
        active = 1 if row["status"] == NodeStatus.ACTIVE else 0
        self._count(batch, row["cluster_id"], active=-active, total=-1)
        row["cluster_id"] = str(e.cluster_id)
        self._count(batch, row["cluster_id"], active=active, total=1)
        self._save(batch, row, e)

    @handles(MemoryNode.Pinned)
    def _pinned(self, batch: Batch, e: MemoryNode.Pinned) -> None:
        row = self._node(batch, e)
        row["pinned"] = True
        if row["status"] == NodeStatus.DYING:
            self._set_status(batch, row, NodeStatus.ACTIVE.value)
        self._save(batch, row, e)

    @handles(MemoryNode.Unpinned)
    def _unpinned(self, batch: Batch, e: MemoryNode.Unpinned) -> None:
        row = self._node(batch, e)
        row["pinned"] = False
        self._save(batch, row, e)

    @handles(MemoryNode.FlaggedDying)
    def _dying(self, batch: Batch, e: MemoryNode.FlaggedDying) -> None:
        row = self._node(batch, e)
        self._set_status(batch, row, NodeStatus.DYING.value)
        self._save(batch, row, e)

    @handles(MemoryNode.MadeDead)
    def _dead(self, batch: Batch, e: MemoryNode.MadeDead) -> None:
        row = self._node(batch, e)
        self._set_status(batch, row, NodeStatus.DEAD.value)
        row["read_since_death"] = False
        self._save(batch, row, e)

    @handles(MemoryNode.Absorbed)
    def _absorbed(self, batch: Batch, e: MemoryNode.Absorbed) -> None:
        row = self._node(batch, e)
        self._set_status(batch, row, NodeStatus.DEAD.value)
        row.update(absorbed_into=str(e.survivor_id), fresh=False, read_since_death=False)
        self._save(batch, row, e)

    @handles(MemoryNode.AbsorbedNodes)
    def _absorbed_nodes(self, batch: Batch, e: MemoryNode.AbsorbedNodes) -> None:
        row = self._node(batch, e)
        scene = json.loads(row["scene_json"])
        scene["when"] = [*scene.get("when", []), *e.when_entries]
        row.update(
            scene_json=_to_json(scene),
            when_json=_when(scene),
            importance=e.importance,
            fresh=False,
            expires_at=utc_text(e.expires_at) if e.expires_at is not None else None,
            sensitive=e.sensitive,
        )
        self._save(batch, row, e, whole=True)

    @handles(MemoryNode.AbsorptionUndone)
    def _absorption_undone(self, batch: Batch, e: MemoryNode.AbsorptionUndone) -> None:
        row = self._node(batch, e)
        scene = {**json.loads(row["scene_json"]), "when": list(e.when)}
        row.update(
            scene_json=_to_json(scene),
            when_json=_when(scene),
            importance=e.importance,
            expires_at=utc_text(e.expires_at) if e.expires_at is not None else None,
            sensitive=e.sensitive,
        )
        self._save(batch, row, e, whole=True)

    @handles(MemoryNode.Unabsorbed)
    def _unabsorbed(self, batch: Batch, e: MemoryNode.Unabsorbed) -> None:
        row = self._node(batch, e)
        self._set_status(batch, row, e.status)
        row.update(absorbed_into=None, fresh=e.fresh, read_since_death=False)
        self._save(batch, row, e)

    @handles(MemoryNode.FreshnessCleared)
    def _unfresh(self, batch: Batch, e: MemoryNode.FreshnessCleared) -> None:
        row = self._node(batch, e)
        row["fresh"] = False
        self._save(batch, row, e)

    @handles(MemoryNode.Reactivated)
    def _reactivated(self, batch: Batch, e: MemoryNode.Reactivated) -> None:
        row = self._node(batch, e)
        row["reactivation_count"] += e.increment
        row["last_activated_at"] = e.timestamp.isoformat()
        row["last_activated_cycle"] = e.cycle
        if row["status"] == NodeStatus.DYING:
            self._set_status(batch, row, NodeStatus.ACTIVE.value)
        elif row["status"] == NodeStatus.DEAD:
            row["read_since_death"] = True
        self._save(batch, row, e)

    @handles(MemoryNode.Revived)
    def _revived(self, batch: Batch, e: MemoryNode.Revived) -> None:
        row = self._node(batch, e)
        self._set_status(batch, row, NodeStatus.ACTIVE.value)
        row.update(absorbed_into=None, read_since_death=False)
        if e.restarts_clock:
            row["last_activated_cycle"] = e.cycle
        self._save(batch, row, e)
