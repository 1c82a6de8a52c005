"""The `links` view (issue #12, ADR 0062): A-MEM links between a being's memories, from both ends.

- `memory_links`: two rows per link, one from each end (`memory_id` → `other_id`), with the score,
  the memory whose `MemoryLinks` recorded it (`owner_id`) and when; a memory's links are one
  indexed read whichever end it is.
- `link_memories`: one row per memory of a being (node, or fact the being owns): `pending` once it
  has a vector and was never linked (what the `links` step reads: its cost follows new memories,
  not all of them), `gone` when it died or was archived, `expires_at`, and how many links it has
  (`links`), so that `link_cleanup` reads only ended memories that still have links.

Everything comes from events (`MemoryNode`, `Fact`, `MemoryLinks`): a rebuild calls no embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.domain.fact import Fact
from engram.domain.links import MemoryLinks
from engram.domain.node import MemoryNode
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.sql import Row
from engram.projections.tables import Index, TableSpec

VIEW = "links"

MEMORY_LINKS = TableSpec(
    name="memory_links",
    columns={
        "id": "text",  # memory id + "/" + other id
        "being_id": "id",
        "memory_id": "id",
        "memory_kind": "text",
        "other_id": "id",
        "other_kind": "text",
        "score": "float",
        "owner_id": "id",  # the memory whose MemoryLinks recorded the link
        "at": "text",
        "position": "int",
    },
    indexes=(Index("from", ("memory_id", "score")),),
)

LINK_MEMORIES = TableSpec(
    name="link_memories",
    columns={
        "id": "id",  # the memory's id
        "being_id": "id",
        "kind": "text",  # node | fact
        "embedded": "bool",
        "processed": "bool",
        "pending": "bool",  # embedded, alive, never linked
        "gone": "text",  # died | archived, or None
        "expires_at": "text",
        "links": "int",
        "position": "int",
    },
    indexes=(
        Index("pending", ("being_id", "position"), where="pending"),
        # What `link_cleanup` reads: memories with links that ended; never a scan of the linked ones.
        Index("gone", ("being_id", "position"), where="links > 0 AND gone IS NOT NULL"),
        Index("expiring", ("being_id", "expires_at"), where="links > 0 AND expires_at IS NOT NULL"),
    ),
)


class LinksView(Projection):
    name = VIEW
    schema_version = 1
    tables = (MEMORY_LINKS, LINK_MEMORIES)

    def prefetch(self, batch: Batch, events: Any) -> None:
        ids = []
        for e in events:
            if isinstance(e, MemoryLinks.Linked):
                ids += [str(e.memory_id), *(str(link["id"]) for link in e.links)]
            elif isinstance(e, MemoryNode.Event | Fact.Event):
                ids.append(str(e.originator_id))
        batch.link_memories.prefetch(batch.conn, ids)

    def _memory(self, batch: Batch, memory_id: Any) -> dict[str, Any] | None:
        return batch.link_memories.get(batch.conn, str(memory_id))

    def _set(self, batch: Batch, e: Any, **changes: Any) -> None:
        row = self._memory(batch, e.originator_id)
        if row is None:
            return
        row.update(changes)
        row["pending"] = bool(row["embedded"] and not row["processed"] and row["gone"] is None)
        row["position"] = batch.position
        batch.link_memories.put(row)

    def _new(self, batch: Batch, e: Any, kind: str, expires_at: Any = None) -> None:
        batch.link_memories.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "kind": kind,
                "embedded": False,
                "processed": False,
                "pending": False,
                "gone": None,
                "expires_at": utc_text(expires_at) if expires_at else None,
                "links": 0,
                "position": batch.position,
            },
            whole=True,
        )

    # -- nodes ----------------------------------------------------------------------------------

    @handles(MemoryNode.Created)
    def _node(self, batch: Batch, e: MemoryNode.Created) -> None:
        self._new(batch, e, "node", e.expires_at)

    @handles(MemoryNode.Embedded)
    def _node_embedded(self, batch: Batch, e: MemoryNode.Embedded) -> None:
        self._set(batch, e, embedded=True)

    @handles(MemoryNode.MadeDead, MemoryNode.Absorbed)
    def _node_died(self, batch: Batch, e: Any) -> None:
        self._set(batch, e, gone="died")

    @handles(MemoryNode.Revived, MemoryNode.Unabsorbed)
    def _node_revived(self, batch: Batch, e: Any) -> None:
        self._set(batch, e, gone=None)

    @handles(MemoryNode.AbsorbedNodes, MemoryNode.AbsorptionUndone)
    def _node_merged(self, batch: Batch, e: Any) -> None:
        self._set(batch, e, expires_at=utc_text(e.expires_at) if e.expires_at else None)

    # -- facts ----------------------------------------------------------------------------------

    @handles(Fact.Stated)
    def _fact(self, batch: Batch, e: Fact.Stated) -> None:
        if e.owner_kind == "being":
            self._new(batch, e, "fact")

    @handles(Fact.Embedded)
    def _fact_embedded(self, batch: Batch, e: Fact.Embedded) -> None:
        self._set(batch, e, embedded=True)

    @handles(Fact.Archived)
    def _fact_archived(self, batch: Batch, e: Fact.Archived) -> None:
        self._set(batch, e, gone="archived")

    @handles(Fact.Revised, Fact.Reinforced)
    def _fact_active(self, batch: Batch, e: Any) -> None:
        self._set(batch, e, gone=None)

    # -- links ----------------------------------------------------------------------------------

    def _count(self, batch: Batch, memory_id: str, delta: int) -> None:
        row = self._memory(batch, memory_id)
        if row is not None:
            row.update(links=max(0, int(row["links"]) + delta), position=batch.position)
            batch.link_memories.put(row)

    @handles(MemoryLinks.Linked)
    def _linked(self, batch: Batch, e: MemoryLinks.Linked) -> None:
        memory = self._memory(batch, e.memory_id)
        if memory is not None:
            memory.update(processed=True, pending=False, position=batch.position)
            batch.link_memories.put(memory)
        me, at = str(e.memory_id), utc_text(e.processed_at)
        for link in e.links:
            other = str(link["id"])
            for a, a_kind, b, b_kind in (
                (me, e.memory_kind, other, link["kind"]),
                (other, link["kind"], me, e.memory_kind),
            ):
                key = f"{a}/{b}"
                if batch.memory_links.get(batch.conn, key) is not None:
                    continue
                batch.memory_links.put(
                    {
                        "id": key,
                        "being_id": str(e.being_id),
                        "memory_id": a,
                        "memory_kind": a_kind,
                        "other_id": b,
                        "other_kind": b_kind,
                        "score": float(link["score"]),
                        "owner_id": me,
                        "at": at,
                        "position": batch.position,
                    }
                )
                self._count(batch, a, 1)

    @handles(MemoryLinks.Unlinked)
    def _unlinked(self, batch: Batch, e: MemoryLinks.Unlinked) -> None:
        owner = str(e.memory_id)
        for other in e.other_ids:
            for a, b in ((owner, other), (other, owner)):
                if batch.memory_links.get(batch.conn, f"{a}/{b}") is not None:
                    batch.memory_links.delete(f"{a}/{b}")
                    self._count(batch, a, -1)


class LinkReads:
    """Queries on the `links` view (`read` is a `ReadModels`; `ensure()` first)."""

    def __init__(self, read: Any) -> None:
        self.read = read

    def _select(self, spec: TableSpec, where: str, params: Sequence[Any], tail: str = "") -> list[Row]:
        return list(self.read._select(VIEW, spec, where, params, tail))

    def links_of(
        self, being_id: UUID, memory_ids: Sequence[str], *, per_memory: int | None = None
    ) -> list[Row]:
        """The links of these memories (from either end), the strongest first."""
        if not memory_ids:
            return []
        marks = ", ".join("?" for _ in memory_ids)
        rows = self._select(
            MEMORY_LINKS,
            f"being_id = ? AND memory_id IN ({marks})",
            [str(being_id), *memory_ids],
            "ORDER BY score DESC, other_id",
        )
        if per_memory is None:
            return rows
        kept: dict[str, int] = {}
        out = []
        for r in rows:
            n = kept.get(str(r["memory_id"]), 0)
            if n < per_memory:
                kept[str(r["memory_id"])] = n + 1
                out.append(r)
        return out

    def all_links(self, being_id: UUID, *, limit: int) -> list[Row]:
        """Every link of the being once (from the end that recorded it), the strongest first."""
        return self._select(
            MEMORY_LINKS,
            "being_id = ? AND owner_id = memory_id",
            [str(being_id)],
            f"ORDER BY score DESC, id LIMIT {int(limit)}",
        )

    def pending(self, being_id: UUID, *, limit: int) -> list[Row]:
        """Memories of the being with a vector that were never linked, the oldest first."""
        return self._select(
            LINK_MEMORIES,
            "being_id = ? AND pending",
            [str(being_id)],
            f"ORDER BY position LIMIT {int(limit)}",
        )

    def pending_count(self, being_id: UUID) -> int:
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT COUNT(*) AS n FROM {tables['link_memories']} WHERE being_id = ? AND pending",
                [str(being_id)],
            )
        return int(rows[0]["n"]) if rows else 0

    def ended(self, being_id: UUID, now: str, *, limit: int) -> list[Row]:
        """Memories of the being that still have links but died, were archived or expired."""
        gone = self._select(
            LINK_MEMORIES,
            "being_id = ? AND links > 0 AND gone IS NOT NULL",
            [str(being_id)],
            f"ORDER BY position LIMIT {int(limit)}",
        )
        expired = self._select(
            LINK_MEMORIES,
            "being_id = ? AND links > 0 AND expires_at IS NOT NULL AND expires_at <= ?",
            [str(being_id), now],
            f"ORDER BY expires_at LIMIT {int(limit)}",
        )
        seen = {r["id"] for r in gone}
        return [*gone, *(r for r in expired if r["id"] not in seen)][:limit]

    def link_counts(self, being_id: UUID | None = None) -> list[int]:
        """How many links each memory has (of one being, or of all), in no order: what the benchmarks
        report as the links per memory."""
        where, params = ("being_id = ?", [str(being_id)]) if being_id is not None else ("1 = 1", [])
        return [int(r["links"]) for r in self._select(LINK_MEMORIES, where, params)]

    def memory(self, memory_id: str) -> Row | None:
        rows = self._select(LINK_MEMORIES, "id = ?", [memory_id])
        return rows[0] if rows else None


def memory_vectors(
    read: Any, node_ids: Sequence[str], fact_ids: Sequence[str]
) -> dict[str, tuple[str, bytes, bool]]:
    """(model, float32 vector bytes, alive) of these nodes and facts, from the `vectors` and
    `fact_search` views (`ensure()` them first). Alive: a node active or dying, a fact active."""
    out: dict[str, tuple[str, bytes, bool]] = {}
    for view, table, ids, alive in (
        ("vectors", "vector_nodes", node_ids, ("active", "dying")),
        ("fact_search", "fact_docs", fact_ids, ("active",)),
    ):
        if not ids:
            continue
        marks = ", ".join("?" for _ in ids)
        with read.reading(view) as (conn, tables):
            rows = conn.query(
                f"SELECT id, model, vector, status FROM {tables[table]} WHERE id IN ({marks})", list(ids)
            )
        for r in rows:
            if r["vector"] is not None and r["model"]:
                out[str(r["id"])] = (str(r["model"]), bytes(r["vector"]), str(r["status"]) in alive)
    return out
