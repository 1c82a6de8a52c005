"""The facts view (issue #11, ADR 0056): facts, the entity refs they carry, entity aliases, spaces.

- `facts`: each fact's current content and state (owner, subject, type, key, importance, pinned,
  status, reinforcements…), and when it was first stated and last changed.
- `fact_refs`: one row per (fact, entity ref): what entity cards and the entity pages read.
- `entity_aliases`: an owner's merged refs (`EntityMap`), alias → into.
- `spaces`, `space_members`: which beings read a space's facts.

Every read is scoped to owners: a being and the spaces it is in (`allowed owners`).
"""

from __future__ import annotations

import json
from typing import Any

from engram.domain.entities import EntityMap
from engram.domain.fact import FACT_CONTENT_FIELDS, Fact, FactStatus
from engram.domain.space import Space
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.tables import Index, TableSpec

FACTS = TableSpec(
    name="facts",
    columns={
        "id": "id",
        "owner_id": "id",  # a being's or a space's id
        "owner_kind": "text",  # being | space
        "written_by": "id",  # the being whose command last changed it
        "key": "text",
        "text": "text",
        "subject": "text",
        "fact_type": "text",
        "memory_type": "text",
        "entity_type": "text",
        "subtype_fact_type": "text",
        "memory_key": "text",
        "evidence": "text",
        "source_message_id": "text",
        "confidence": "float",
        "importance": "int",  # 0–3, after reinforcement and pinning
        "pinned": "bool",
        "entity_refs_json": "text",
        "entity_label": "text",
        "source": "text",
        "source_type": "text",
        "source_trust": "float",
        "source_entity": "text",
        "channel": "text",
        "status": "text",  # active | archived
        "reinforcements": "int",
        "stated_at": "text",  # utc_text of the first statement
        "updated_at": "text",  # utc_text of the latest change of content or state
        "version": "int",
        "position": "int",
    },
    indexes=(
        Index("subject", ("owner_id", "subject", "status", "updated_at")),
        Index("recent", ("owner_id", "status", "updated_at")),
        Index("pinned", ("owner_id", "pinned"), where="pinned"),
    ),
)

FACT_REFS = TableSpec(
    name="fact_refs",
    columns={"id": "text", "fact_id": "id", "owner_id": "id", "ref": "text"},  # id: "<fact>/<ref>"
    indexes=(Index("ref", ("owner_id", "ref")), Index("fact", ("fact_id",))),
)

ENTITY_ALIASES = TableSpec(
    name="entity_aliases",
    columns={
        "id": "text",
        "owner_id": "id",
        "alias": "text",
        "into_ref": "text",
        "at": "text",
    },  # id: "<owner>/<alias>"
    indexes=(Index("owner", ("owner_id",)),),
)

SPACES = TableSpec(
    name="spaces", columns={"id": "id", "name": "text", "created_at": "text", "position": "int"}
)

SPACE_MEMBERS = TableSpec(
    name="space_members",
    columns={"id": "text", "space_id": "id", "being_id": "id"},  # id: "<space>/<being>"
    indexes=(Index("being", ("being_id",)),),
)


class FactsView(Projection):
    name = "facts"
    schema_version = 1
    tables = (FACTS, FACT_REFS, ENTITY_ALIASES, SPACES, SPACE_MEMBERS)

    @staticmethod
    def hold_key(event: Any) -> str:
        """A space's events are held back with its facts' (the space's id is their owner)."""
        if isinstance(event, Space.Event):
            return str(event.originator_id)
        return Projection.hold_key(event)

    def prefetch(self, batch: Batch, events: Any) -> None:
        ids = [
            str(e.originator_id)
            for e in events
            if isinstance(e, Fact.Event) and not isinstance(e, Fact.Stated)
        ]
        batch.facts.prefetch(batch.conn, ids)

    def _fact(self, batch: Batch, e: Any) -> dict[str, Any]:
        row = batch.facts.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(f"facts view: {type(e).__qualname__} for unknown fact {e.originator_id}")
        return row

    def _put(self, batch: Batch, e: Any, row: dict[str, Any], **changes: Any) -> None:
        row.update(
            changes, version=e.originator_version, position=batch.position, updated_at=utc_text(e.timestamp)
        )
        batch.facts.put(row)

    def _refs(self, batch: Batch, fact_id: str, owner_id: str, old: list[str], new: list[str]) -> None:
        for ref in old:
            if ref not in new:
                batch.fact_refs.delete(f"{fact_id}/{ref}")
        for ref in new:
            batch.fact_refs.put(
                {"id": f"{fact_id}/{ref}", "fact_id": fact_id, "owner_id": owner_id, "ref": ref}
            )

    @handles(Fact.Stated)
    def _stated(self, batch: Batch, e: Fact.Stated) -> None:
        fact_id, owner = str(e.originator_id), str(e.being_id)
        at = utc_text(e.timestamp)
        batch.facts.put(
            {
                "id": fact_id,
                "owner_id": owner,
                "owner_kind": e.owner_kind,
                "written_by": str(e.written_by),
                "key": e.key,
                **{name: getattr(e, name) for name in FACT_CONTENT_FIELDS if name != "entity_refs"},
                "memory_key": e.memory_key,
                "importance": e.importance,
                "pinned": e.pinned,
                "entity_refs_json": json.dumps(e.entity_refs, ensure_ascii=False),
                "status": FactStatus.ACTIVE.value,
                "reinforcements": 0,
                "stated_at": at,
                "updated_at": at,
                "version": e.originator_version,
                "position": batch.position,
            }
        )
        self._refs(batch, fact_id, owner, [], e.entity_refs)

    @handles(Fact.Revised)
    def _revised(self, batch: Batch, e: Fact.Revised) -> None:
        row = self._fact(batch, e)
        old = json.loads(row["entity_refs_json"])
        content = {name: getattr(e, name) for name in FACT_CONTENT_FIELDS if name != "entity_refs"}
        importance = 3 if row["pinned"] else e.importance
        self._put(
            batch,
            e,
            row,
            **content,
            written_by=str(e.written_by),
            entity_refs_json=json.dumps(e.entity_refs, ensure_ascii=False),
            importance=importance,
            reinforcements=0,
            status=FactStatus.ACTIVE.value,
        )
        self._refs(batch, row["id"], row["owner_id"], old, e.entity_refs)

    @handles(Fact.Reinforced)
    def _reinforced(self, batch: Batch, e: Fact.Reinforced) -> None:
        row = self._fact(batch, e)
        self._put(
            batch,
            e,
            row,
            written_by=str(e.written_by),
            reinforcements=e.reinforcements,
            importance=e.importance,
            status=FactStatus.ACTIVE.value,
        )

    @handles(Fact.Pinned)
    def _pinned(self, batch: Batch, e: Fact.Pinned) -> None:
        self._put(batch, e, self._fact(batch, e), pinned=True, importance=3)

    @handles(Fact.Unpinned)
    def _unpinned(self, batch: Batch, e: Fact.Unpinned) -> None:
        row = self._fact(batch, e)
        self._put(batch, e, row, pinned=False, importance=e.importance)

    @handles(Fact.Archived)
    def _archived(self, batch: Batch, e: Fact.Archived) -> None:
        self._put(batch, e, self._fact(batch, e), status=FactStatus.ARCHIVED.value)

    @handles(EntityMap.Merged)
    def _merged(self, batch: Batch, e: EntityMap.Merged) -> None:
        owner = str(e.being_id)
        batch.entity_aliases.put(
            {
                "id": f"{owner}/{e.alias}",
                "owner_id": owner,
                "alias": e.alias,
                "into_ref": e.into,
                "at": utc_text(e.timestamp),
            }
        )

    @handles(EntityMap.Unmerged)
    def _unmerged(self, batch: Batch, e: EntityMap.Unmerged) -> None:
        batch.entity_aliases.delete(f"{e.being_id}/{e.alias}")

    @handles(Space.Created)
    def _space(self, batch: Batch, e: Space.Created) -> None:
        space = str(e.originator_id)
        batch.spaces.put(
            {"id": space, "name": e.name, "created_at": utc_text(e.timestamp), "position": batch.position}
        )
        for being in e.members:
            batch.space_members.put({"id": f"{space}/{being}", "space_id": space, "being_id": str(being)})

    @handles(Space.Joined)
    def _joined(self, batch: Batch, e: Space.Joined) -> None:
        space = str(e.originator_id)
        batch.space_members.put(
            {"id": f"{space}/{e.being_id}", "space_id": space, "being_id": str(e.being_id)}
        )

    @handles(Space.Left)
    def _left(self, batch: Batch, e: Space.Left) -> None:
        batch.space_members.delete(f"{e.originator_id}/{e.being_id}")
