"""The importance ledger (issue #12, ADR 0060): every memory's importance on the one 1–10 scale of
`domain/importance.py`, by log position — what sleep's reflection adds up since its last run and
picks its "recent important memories" from, and what pruning reads.

`importance_scores`: one row per memory (node, fact of a being, message): its kind, the position and
time it came in, its poignancy (1–10) and how it was scored (`given` by the caller or the statement,
`heuristic`, `llm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.domain.fact import Fact
from engram.domain.importance import fact_poignancy, message_poignancy, node_poignancy
from engram.domain.message import Message
from engram.domain.node import MemoryNode
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.sql import Row
from engram.projections.tables import Index, TableSpec

IMPORTANCE_SCORES = TableSpec(
    name="importance_scores",
    columns={
        "id": "id",  # the memory's id
        "being_id": "id",
        "kind": "text",  # node | fact | message
        "position": "int",  # where it came in
        "at": "text",
        "poignancy": "int",  # 1-10
        "method": "text",  # given | heuristic | llm
    },
    indexes=(Index("being", ("being_id", "position")),),
)

VIEW = "importance"


class ImportanceView(Projection):
    name = VIEW
    schema_version = 1
    tables = (IMPORTANCE_SCORES,)

    def _put(self, batch: Batch, e: Any, kind: str, poignancy: int, method: str) -> None:
        batch.importance_scores.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "kind": kind,
                "position": batch.position,
                "at": utc_text(e.timestamp),
                "poignancy": poignancy,
                "method": method,
            }
        )

    def _rescore(self, batch: Batch, memory_id: UUID, poignancy: int, method: str) -> None:
        row = batch.importance_scores.get(batch.conn, str(memory_id))
        if row is not None:
            batch.importance_scores.put({**row, "poignancy": poignancy, "method": method})

    @handles(MemoryNode.Created)
    def _node(self, batch: Batch, e: MemoryNode.Created) -> None:
        self._put(batch, e, "node", node_poignancy(e.importance), "given")

    @handles(Message.Received)
    def _message(self, batch: Batch, e: Message.Received) -> None:
        score = message_poignancy(text=e.text, role=e.role, urgent=e.urgent, priority=e.priority)
        self._put(batch, e, "message", score, "heuristic")

    @handles(Fact.Stated)
    def _fact(self, batch: Batch, e: Fact.Stated) -> None:
        if e.owner_kind == "being":
            self._put(batch, e, "fact", fact_poignancy(e.importance), "given")

    @handles(Fact.Revised, Fact.Reinforced, Fact.Unpinned)
    def _fact_changed(self, batch: Batch, e: Any) -> None:
        self._rescore(batch, e.originator_id, fact_poignancy(e.importance), "given")

    @handles(Fact.Pinned)
    def _fact_pinned(self, batch: Batch, e: Fact.Pinned) -> None:
        self._rescore(batch, e.originator_id, fact_poignancy(3), "given")


class ImportanceReads:
    """Queries on the ledger (`read` is a `ReadModels`; `ensure()` first)."""

    def __init__(self, read: Any) -> None:
        self.read = read

    def _select(self, where: str, params: Sequence[Any], tail: str = "") -> list[Row]:
        return list(self.read._select(VIEW, IMPORTANCE_SCORES, where, params, tail))

    def cumulative(self, being_id: UUID, *, after_position: int = 0) -> int:
        """The sum of the poignancy of the being's memories that came in after `after_position`."""
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT COALESCE(SUM(poignancy), 0) AS total FROM {tables['importance_scores']} "
                "WHERE being_id = ? AND position > ?",
                [str(being_id), int(after_position)],
            )
        return int(rows[0]["total"]) if rows else 0

    def top(self, being_id: UUID, *, after_position: int = 0, limit: int = 20) -> list[Row]:
        """The being's most important memories that came in after `after_position`, the most
        important first, then the newest."""
        return self._select(
            "being_id = ? AND position > ?",
            [str(being_id), int(after_position)],
            f"ORDER BY poignancy DESC, position DESC LIMIT {int(limit)}",
        )

    def score(self, memory_id: UUID | str) -> Row | None:
        rows = self._select("id = ?", [str(memory_id)])
        return rows[0] if rows else None
