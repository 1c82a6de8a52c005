"""Reads of the facts view (ADR 0056). Every read takes the owners a being may read: itself and the
spaces it is in (`owners`), never more."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.projections.facts import ENTITY_ALIASES, FACT_REFS, FACTS, SPACE_MEMBERS, SPACES
from engram.projections.queries import ReadModels
from engram.projections.tables import TableSpec

Row = dict[str, Any]
VIEW = "facts"


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class FactReads:
    def __init__(self, read: ReadModels) -> None:
        self.read = read

    def _select(self, spec: TableSpec, where: str, params: Sequence[Any], tail: str = "") -> list[Row]:
        return self.read._select(VIEW, spec, where, params, tail)

    # -- owners ---------------------------------------------------------------------------------

    def spaces_of(self, being_id: UUID) -> list[Row]:
        """The spaces the being is in: id and name."""
        members = self._select(SPACE_MEMBERS, "being_id = ?", [str(being_id)])
        ids = [m["space_id"] for m in members]
        if not ids:
            return []
        return self._select(SPACES, f"id IN ({_marks(ids)})", ids, "ORDER BY name")

    def owners(self, being_id: UUID) -> list[str]:
        """The owners whose facts the being reads: itself first, then its spaces (by id)."""
        members = self._select(SPACE_MEMBERS, "being_id = ?", [str(being_id)], "ORDER BY space_id")
        return [str(being_id), *(m["space_id"] for m in members)]

    def space_by_name(self, name: str) -> Row | None:
        rows = self._select(SPACES, "name = ?", [name])
        return rows[0] if rows else None

    def space_members(self, space_id: UUID | str) -> list[str]:
        return [m["being_id"] for m in self._select(SPACE_MEMBERS, "space_id = ?", [str(space_id)])]

    # -- facts ----------------------------------------------------------------------------------

    def fact(self, owners: Sequence[str], fact_id: UUID | str) -> Row | None:
        rows = self._select(FACTS, f"id = ? AND owner_id IN ({_marks(owners)})", [str(fact_id), *owners])
        return rows[0] if rows else None

    def facts(
        self,
        owners: Sequence[str],
        *,
        subject: str | None = None,
        include_archived: bool = False,
        limit: int = 100,
    ) -> list[Row]:
        """The owners' facts (active only unless `include_archived`), the latest change first."""
        where, params = f"owner_id IN ({_marks(owners)})", list(owners)
        if subject is not None:
            where += " AND subject = ?"
            params.append(subject)
        if not include_archived:
            where += " AND status = 'active'"
        return self._select(FACTS, where, params, f"ORDER BY updated_at DESC, id LIMIT {int(limit)}")

    def pinned(self, owners: Sequence[str], limit: int = 20) -> list[Row]:
        """Pinned active facts: spec 004's foundation block."""
        return self._select(
            FACTS,
            f"owner_id IN ({_marks(owners)}) AND pinned AND status = 'active'",
            list(owners),
            f"ORDER BY updated_at DESC, id LIMIT {int(limit)}",
        )

    def facts_with_refs(self, owners: Sequence[str], refs: Sequence[str]) -> list[Row]:
        """(fact id, ref) of the owners' facts that carry one of `refs`."""
        if not refs:
            return []
        return self._select(
            FACT_REFS,
            f"owner_id IN ({_marks(owners)}) AND ref IN ({_marks(refs)})",
            [*owners, *refs],
        )

    def aliases(self, owners: Sequence[str]) -> dict[str, str]:
        """alias → into, over the owners' entity maps (the being's own merges win over a space's)."""
        rows = self._select(ENTITY_ALIASES, f"owner_id IN ({_marks(owners)})", list(owners))
        order = {o: i for i, o in enumerate(owners)}
        merged: dict[str, str] = {}
        for r in sorted(rows, key=lambda r: order[r["owner_id"]], reverse=True):
            merged[r["alias"]] = r["into_ref"]
        return merged

    # -- helper A: archive by capacity (ADR 0057) ---------------------------------------------------

    def over_capacity(self, owner_id: UUID | str, subject: str, keep: int) -> list[Row]:
        """The owner's active, unpinned facts of `subject` after its latest `keep` active ones (pinned
        ones count among the kept): what archiving by capacity takes."""
        rows = self._select(
            FACTS,
            "owner_id = ? AND subject = ? AND status = 'active'",
            [str(owner_id), subject],
            f"ORDER BY updated_at DESC, id DESC LIMIT 1000000 OFFSET {int(keep)}",
        )
        return [r for r in rows if not r["pinned"]]

    def all_spaces(self) -> list[Row]:
        """Every space (for the admin's `engram space list`)."""
        return self._select(SPACES, "1 = 1", [], "ORDER BY name")

    # -- helper C: retrieval (ADR 0059) ---------------------------------------------------------

    def facts_by_ids(self, owners: Sequence[str], ids: Sequence[str]) -> dict[str, Row]:
        """The owners' facts among `ids` (any status), by id."""
        if not ids or not owners:
            return {}
        # By primary key alone, the owners checked here: with the owners in the WHERE clause a
        # planner may walk an owner index over all its facts instead of looking `ids` up.
        allowed = set(owners)
        rows = self._select(FACTS, f"id IN ({_marks(ids)})", list(ids))
        return {str(r["id"]): r for r in rows if str(r["owner_id"]) in allowed}

    def refs_of(self, owners: Sequence[str]) -> list[Row]:
        """Every (fact, ref) row of the owners' facts."""
        return self._select(
            FACT_REFS, f"owner_id IN ({_marks(owners)})", list(owners), "ORDER BY ref, fact_id"
        )

    def card_candidates(self, owners: Sequence[str], refs: Sequence[str]) -> list[Row]:
        """(ref, fact) of the owners' active facts carrying one of `refs` that may enter an entity
        card (pinned, or importance 2 or more): the few columns a card needs, in one join."""
        if not refs or not owners:
            return []
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT r.ref AS ref, f.id AS id, f.text AS text, f.pinned AS pinned, "
                f"f.importance AS importance, f.updated_at AS updated_at, f.entity_label AS entity_label "
                f"FROM {tables['fact_refs']} r JOIN {tables['facts']} f ON f.id = r.fact_id "
                f"WHERE r.owner_id IN ({_marks(owners)}) AND r.ref IN ({_marks(refs)}) "
                f"AND f.status = 'active' AND (f.pinned OR f.importance >= 2)",
                [*owners, *refs],
            )
        return [
            {**r, "id": str(r["id"]), "pinned": bool(r["pinned"]), "importance": int(r["importance"])}
            for r in rows
        ]
