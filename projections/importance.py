"""The importance ledger (issue #12, ADR 0060): every memory's importance on the one 1–10 scale of
`domain/importance.py`, by log position — what sleep's reflection adds up since its last run and
picks its "recent important memories" from, and what pruning reads.

`importance_scores`: one row per memory (node, fact of a being, message, note other than a scene —
a scene is its node): its kind, the position and time it came in, its poignancy (1–10) and how it was
scored (`given` by the caller or the statement, `heuristic`, `llm`) with that method's version (the
heuristic's, or the LLM prompt's), the LLM answers refused for it (`attempts`) and whether it is
sensitive (never sent to an LLM). Heuristic scores are derived here from the intake events by the
pure functions of `domain/importance.py` (ADR 0061): the view's `schema_version` moves with
`HEURISTIC_VERSION`. LLM scores come from `ImportanceScoring.Scored` events only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.domain.decay import DEFAULT_IMPORTANCE
from engram.domain.fact import Fact
from engram.domain.importance import (
    HEURISTIC_VERSION,
    fact_poignancy,
    message_poignancy,
    node_poignancy,
    note_poignancy,
    scene_poignancy,
)
from engram.domain.importance_scoring import MAX_ATTEMPTS, ImportanceScoring
from engram.domain.message import Message
from engram.domain.node import MemoryNode
from engram.domain.note import Note, NoteKind, Sensitivity
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.sql import Row
from engram.projections.tables import Index, TableSpec

IMPORTANCE_SCORES = TableSpec(
    name="importance_scores",
    columns={
        "id": "id",  # the memory's id
        "being_id": "id",
        "kind": "text",  # node | fact | message | note
        "position": "int",  # where it came in
        "at": "text",
        "poignancy": "int",  # 1-10
        "method": "text",  # given | heuristic | llm
        "version": "text",  # the heuristic's version, or the LLM prompt's; None when given
        "attempts": "int",  # LLM answers refused for it (at MAX_ATTEMPTS it keeps its heuristic)
        "sensitive": "int",  # 1: never sent to an LLM
        "scored_by": "id",  # the ImportanceScoring that last answered or refused for it (`engram why`)
    },
    indexes=(
        Index("being", ("being_id", "position")),
        Index("llm_pending", ("being_id", "method", "position")),
    ),
)

VIEW = "importance"


class ImportanceView(Projection):
    name = VIEW
    schema_version = (
        3  # 2: heuristic-2 features, notes, scenes scored heuristically, LLM scores; 3: scored_by
    )
    tables = (IMPORTANCE_SCORES,)

    def _put(
        self, batch: Batch, e: Any, kind: str, poignancy: int, method: str, *, sensitive: bool = False
    ) -> None:
        batch.importance_scores.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "kind": kind,
                "position": batch.position,
                "at": utc_text(e.timestamp),
                "poignancy": poignancy,
                "method": method,
                "version": HEURISTIC_VERSION if method == "heuristic" else None,
                "attempts": 0,
                "sensitive": int(sensitive),
                "scored_by": None,
            }
        )

    def _rescore(
        self,
        batch: Batch,
        memory_id: UUID | str,
        poignancy: int,
        method: str,
        version: str | None = None,
        scored_by: UUID | None = None,
    ) -> None:
        row = batch.importance_scores.get(batch.conn, str(memory_id))
        if row is not None:
            changed = {**row, "poignancy": poignancy, "method": method, "version": version}
            if scored_by is not None:
                changed["scored_by"] = str(scored_by)
            batch.importance_scores.put(changed)

    @handles(MemoryNode.Created)
    def _node(self, batch: Batch, e: MemoryNode.Created) -> None:
        # The event does not say whether the caller gave the importance: the default (0.5) is taken
        # as not given, and the scene is scored by its features (its decay still starts from 0.5).
        if e.importance != DEFAULT_IMPORTANCE:
            self._put(batch, e, "node", node_poignancy(e.importance), "given", sensitive=e.sensitive)
            return
        scene = e.scene
        text = " ".join(
            [str(scene.get("action", "")), e.feeling, *(str(d) for d in scene.get("dialogue") or [])]
        )
        score = scene_poignancy(
            text=text, emotion=e.emotion, actors=len(scene.get("actors") or []), themes=len(e.themes)
        )
        self._put(batch, e, "node", score, "heuristic", sensitive=e.sensitive)

    @handles(MemoryNode.AbsorbedNodes, MemoryNode.AbsorptionUndone)
    def _node_merged(self, batch: Batch, e: Any) -> None:
        # A merge's survivor may become sensitive (never sent to an LLM from then on), and a given
        # importance follows the survivor's (spec ❹'s consolidation bonus).
        row = batch.importance_scores.get(batch.conn, str(e.originator_id))
        if row is None:
            return
        changed = {**row, "sensitive": int(e.sensitive)}
        if row["method"] == "given":
            changed["poignancy"] = node_poignancy(e.importance)
        batch.importance_scores.put(changed)

    @handles(Message.Received)
    def _message(self, batch: Batch, e: Message.Received) -> None:
        score = message_poignancy(text=e.text, role=e.role, urgent=e.urgent, priority=e.priority)
        self._put(batch, e, "message", score, "heuristic")

    @handles(Note.Noted)
    def _note(self, batch: Batch, e: Note.Noted) -> None:
        if e.kind == NoteKind.SCENE.value:
            return  # a scene is a memory as its node
        score = note_poignancy(kind=e.kind, text=e.text)
        self._put(batch, e, "note", score, "heuristic", sensitive=e.sensitivity == Sensitivity.SENSITIVE)

    @handles(ImportanceScoring.Scored)
    def _llm_scored(self, batch: Batch, e: ImportanceScoring.Scored) -> None:
        for memory_id, score in e.scores.items():
            self._rescore(batch, memory_id, score, "llm", e.prompt_version, e.originator_id)
        self._refused(batch, e.missing, e.originator_id)

    @handles(ImportanceScoring.Refused)
    def _llm_refused(self, batch: Batch, e: ImportanceScoring.Refused) -> None:
        self._refused(batch, e.memory_ids, e.originator_id)

    def _refused(self, batch: Batch, memory_ids: Sequence[str], scored_by: UUID) -> None:
        for memory_id in memory_ids:
            row = batch.importance_scores.get(batch.conn, memory_id)
            if row is not None and row["method"] == "heuristic":
                batch.importance_scores.put(
                    {**row, "attempts": int(row["attempts"]) + 1, "scored_by": str(scored_by)}
                )

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

    def scored_by(self, being_id: UUID, memory_id: UUID) -> UUID | None:
        """The ImportanceScoring that last answered or refused for one memory (`engram why`)."""
        rows = self._select("id = ? AND being_id = ?", [str(memory_id), str(being_id)])
        found = rows[0]["scored_by"] if rows else None
        return UUID(str(found)) if found else None

    _LLM_PENDING = "being_id = ? AND method = 'heuristic' AND sensitive = 0 AND attempts < ?"

    def llm_pending(self, being_id: UUID, *, limit: int) -> list[Row]:
        """The being's memories still scored by the heuristic that an LLM may score, oldest first."""
        return self._select(
            self._LLM_PENDING, [str(being_id), MAX_ATTEMPTS], f"ORDER BY position LIMIT {int(limit)}"
        )

    def llm_pending_count(self, being_id: UUID) -> int:
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT COUNT(*) AS n FROM {tables['importance_scores']} WHERE {self._LLM_PENDING}",
                [str(being_id), MAX_ATTEMPTS],
            )
        return int(rows[0]["n"]) if rows else 0

    def score(self, memory_id: UUID | str) -> Row | None:
        rows = self._select("id = ?", [str(memory_id)])
        return rows[0] if rows else None
