"""The profiles view (issue #12, ADR 0064): each being's entity profiles and its reflections.

- `entity_profiles`: one row per (being, entity ref): attributes, recent observations, the
  relationship (favorability, Dunbar state, interactions), how many observations the attributes fold.
- `reflections`: one row per reflection: its questions, insights and their sources, by number.

A rebuild replays the recorded events: no LLM call, no favorability recomputed.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from engram.domain.entity_profile import MAX_OBSERVATIONS, EntityProfile, dunbar_state
from engram.domain.reflection import Reflections
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.queries import ReadModels
from engram.projections.sql import Row
from engram.projections.tables import Index, TableSpec

ENTITY_PROFILES = TableSpec(
    name="entity_profiles",
    columns={
        "id": "id",  # profile_id_for(being, ref)
        "being_id": "id",
        "ref": "text",
        "attributes": "text",  # JSON object name -> value
        "observations": "text",  # JSON list, the newest last
        "observed": "int",
        "folded": "int",
        "interaction_count": "int",
        "favorability": "float",
        "state": "text",  # stranger | acquaintance | friend | ally
        "consolidated_by": "text",  # the model of the latest consolidation
        "refused": "text",  # why the latest answer was refused (None once one is kept)
        "up_to_position": "int",
        "created_at": "text",
        "updated_at": "text",
        "position": "int",
    },
    indexes=(Index("being", ("being_id", "ref")), Index("unfolded", ("being_id", "observed", "folded"))),
)

REFLECTIONS = TableSpec(
    name="reflections",
    columns={
        "id": "text",  # "<being>/<number>"
        "being_id": "id",
        "number": "int",
        "at": "text",
        "up_to_position": "int",
        "importance": "int",
        "questions": "text",  # JSON
        "insights": "text",  # JSON [{text, sources, note_id}]
        "sources": "text",  # JSON [{id, kind, poignancy}]
        "model": "text",
        "position": "int",
    },
    indexes=(Index("being", ("being_id", "number")),),
)

VIEW = "profiles"


class ProfilesView(Projection):
    name = VIEW
    schema_version = 1
    tables = (ENTITY_PROFILES, REFLECTIONS)

    def _row(self, batch: Batch, e: Any) -> dict[str, Any]:
        row = batch.entity_profiles.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(f"profiles view: {type(e).__qualname__} for unknown profile {e.originator_id}")
        return dict(row)

    def _put(self, batch: Batch, e: Any, row: dict[str, Any], **changes: Any) -> None:
        row.update(changes, updated_at=utc_text(e.timestamp), position=batch.position)
        batch.entity_profiles.put(row)

    @handles(EntityProfile.Started)
    def _started(self, batch: Batch, e: EntityProfile.Started) -> None:
        at = utc_text(e.timestamp)
        batch.entity_profiles.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "ref": e.ref,
                "attributes": "{}",
                "observations": "[]",
                "observed": 0,
                "folded": 0,
                "interaction_count": 0,
                "favorability": 0.0,
                "state": dunbar_state(0.0),
                "consolidated_by": None,
                "refused": None,
                "up_to_position": 0,
                "created_at": at,
                "updated_at": at,
                "position": batch.position,
            }
        )

    @handles(EntityProfile.Observed)
    def _observed(self, batch: Batch, e: EntityProfile.Observed) -> None:
        row = self._row(batch, e)
        kept = (json.loads(row["observations"]) + list(e.observations))[-MAX_OBSERVATIONS:]
        self._put(
            batch,
            e,
            row,
            observations=json.dumps(kept, ensure_ascii=False),
            observed=int(row["observed"]) + len(e.observations),
            interaction_count=int(row["interaction_count"]) + e.interactions,
            favorability=e.favorability,
            state=dunbar_state(e.favorability),
            up_to_position=e.up_to_position,
        )

    @handles(EntityProfile.Consolidated)
    def _consolidated(self, batch: Batch, e: EntityProfile.Consolidated) -> None:
        row = self._row(batch, e)
        self._put(
            batch,
            e,
            row,
            attributes=json.dumps(e.attributes, ensure_ascii=False, sort_keys=True),
            folded=e.folded,
            consolidated_by=e.model,
            refused=None,
        )

    @handles(EntityProfile.ConsolidationRefused)
    def _refused(self, batch: Batch, e: EntityProfile.ConsolidationRefused) -> None:
        self._put(batch, e, self._row(batch, e), refused=e.reason)

    @handles(Reflections.Reflected)
    def _reflected(self, batch: Batch, e: Reflections.Reflected) -> None:
        batch.reflections.put(
            {
                "id": f"{e.being_id}/{e.number}",
                "being_id": str(e.being_id),
                "number": e.number,
                "at": utc_text(e.timestamp),
                "up_to_position": e.up_to_position,
                "importance": e.importance,
                "questions": json.dumps(e.questions, ensure_ascii=False),
                "insights": json.dumps(e.insights, ensure_ascii=False),
                "sources": json.dumps(e.sources, ensure_ascii=False),
                "model": e.model,
                "position": batch.position,
            }
        )


def _decode(row: Row, *names: str) -> dict[str, Any]:
    return {**row, **{n: json.loads(row[n]) if row[n] is not None else None for n in names}}


class ProfileReads:
    """Queries on the profiles view (`ensure()` first). Every read takes the being."""

    def __init__(self, read: ReadModels) -> None:
        self.read = read

    def _select(self, spec: TableSpec, where: str, params: list[Any], tail: str = "") -> list[Row]:
        return list(self.read._select(VIEW, spec, where, params, tail))

    def profile(self, being_id: UUID, ref: str) -> dict[str, Any] | None:
        rows = self._select(ENTITY_PROFILES, "being_id = ? AND ref = ?", [str(being_id), ref])
        return _decode(rows[0], "attributes", "observations") if rows else None

    def profiles(self, being_id: UUID, limit: int = 500) -> list[dict[str, Any]]:
        rows = self._select(
            ENTITY_PROFILES, "being_id = ?", [str(being_id)], f"ORDER BY ref LIMIT {int(limit)}"
        )
        return [_decode(r, "attributes", "observations") for r in rows]

    def unfolded(self, being_id: UUID, limit: int) -> list[Row]:
        """Profiles with observations the attributes do not hold yet, the longest waiting first."""
        return self._select(
            ENTITY_PROFILES,
            "being_id = ? AND observed > folded",
            [str(being_id)],
            f"ORDER BY updated_at, ref LIMIT {int(limit)}",
        )

    def unfolded_count(self, being_id: UUID) -> int:
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT COUNT(*) AS n FROM {tables['entity_profiles']} WHERE being_id = ? AND observed > folded",
                [str(being_id)],
            )
        return int(rows[0]["n"]) if rows else 0

    def reflections(self, being_id: UUID, limit: int = 100) -> list[dict[str, Any]]:
        rows = self._select(
            REFLECTIONS, "being_id = ?", [str(being_id)], f"ORDER BY number DESC LIMIT {int(limit)}"
        )
        return [_decode(r, "questions", "insights", "sources") for r in rows]


def gathered_since(read: ReadModels, being_id: UUID, after: int) -> tuple[int, int]:
    """The importance (1–10 each, the `importance` view) of the being's memories that came in after
    `after`, and the position of the newest of them (`after` when there is none): read together, so
    that a reflection resets the counter exactly past what it added up."""
    with read.reading("importance") as (conn, tables):
        rows = conn.query(
            f"SELECT COALESCE(SUM(poignancy), 0) AS total, COALESCE(MAX(position), 0) AS last "
            f"FROM {tables['importance_scores']} WHERE being_id = ? AND position > ?",
            [str(being_id), int(after)],
        )
    if not rows or not rows[0]["total"]:
        return 0, after
    return int(rows[0]["total"]), int(rows[0]["last"])
