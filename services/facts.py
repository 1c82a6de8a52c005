"""Writing durable facts (issue #11, ADR 0056): keyed upsert with history, pins, archives, spaces.

A fact's id derives from its owner and key, so a batch loads the facts its keys name and either
states them or restates them (reinforced or revised) in one transaction. Two writers of one key
race on the fact's next version: one is written, the other command runs again on the new version and
lands after it. Nothing is lost and nothing fails silently (spec 004's race).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog
from eventsourcing.domain import Aggregate

from engram.domain.being import Being
from engram.domain.entities import EntityMap
from engram.domain.errors import InvalidInput
from engram.domain.fact import (
    LORE_CONFIDENCE,
    LORE_SUBJECT,
    ArchiveReason,
    Fact,
    FactContent,
    FactSource,
    FactType,
    fact_key,
    lore_text,
)
from engram.domain.ids import entity_map_id, fact_id_for_key, space_id_for_name
from engram.domain.space import Space, check_space_name
from engram.services.beings import resolve_being_id
from engram.services.commands import MAX_BATCH_FACTS, Done, FactInput, FactsWritten, FactWritten
from engram.services.errors import NotFound
from engram.services.messages import refusal
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

Recorder = Callable[[list[FactWritten], list[dict[str, Any]]], Aggregate | None]


def lore_content(line: str) -> FactContent:
    if not isinstance(line, str) or not line.strip(" \t\n."):
        raise InvalidInput("a lore line is text, not only spaces", field="text")
    return FactContent(
        lore_text(line),
        LORE_SUBJECT,
        fact_type=FactType.LORE,
        confidence=LORE_CONFIDENCE,
        source=FactSource.LORE,
    )


@dataclass(frozen=True)
class Owner:
    """Whose a fact is: a being's own, or a space the being is in."""

    id: UUID
    kind: str  # being | space
    name: str


log = structlog.get_logger(__name__)

FACT_WRITE_ATTEMPTS = 16
"""Attempts of a fact write: each round of a race on one key lands at least one writer, so 8 writers
of a hot key need up to 8; twice that leaves room for late arrivals (ADR 0057)."""

AfterWrite = Callable[[UUID, set[str], int | None], object]
"""Called after a write with the owner, the subjects written and the position (archive by capacity,
ADR 0057): a follow-up of its own, so a failure there never undoes the write."""


class FactCommands:
    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        after_write: AfterWrite | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self.after_write = after_write

    # -- owners ---------------------------------------------------------------------------------

    def owner(self, being_ref: str, space: str | None = None) -> Owner:
        """The owner a being writes to: itself, or `space` — which must exist and have the being as a
        member (else `invalid_input` naming `space`: a being cannot learn which spaces exist)."""
        being_id = resolve_being_id(self.store, being_ref)
        if space is None:
            being = self.store.get(Being, being_id)
            return Owner(being_id, "being", being.name)
        name = check_space_name(space)
        found = self.store.find(Space, space_id_for_name(name))
        if found is None or not found.has_member(being_id):
            raise InvalidInput(f"no space {name!r} with this being in it", field="space")
        return Owner(found.id, "space", found.name)

    def _fact(self, being_id: UUID, fact_id: UUID) -> Fact:
        """The fact, if it is the being's own or of a space the being is in now (checked on the
        space's aggregate, not a view that may lag a departure); else `NotFound`."""
        fact = self.store.find(Fact, fact_id)
        if fact is not None and fact.owner_id == being_id:
            return fact
        if fact is not None and fact.owner_kind == "space":
            space = self.store.find(Space, fact.owner_id)
            if space is not None and space.has_member(being_id):
                return fact
        raise NotFound(f"fact {fact_id} not found")

    # -- writes ---------------------------------------------------------------------------------

    def state(self, being_ref: str, fact: FactInput, *, space: str | None = None) -> FactWritten:
        return self.state_many(being_ref, [fact], space=space).facts[0]

    def state_many(
        self,
        being_ref: str,
        facts: Sequence[FactInput | FactContent],
        *,
        space: str | None = None,
        skip_refused: bool = False,
        record: Recorder | None = None,
    ) -> FactsWritten:
        """State `facts` for the being (or its `space`) in one transaction: each new key is a new
        fact, a known key a new version of its fact. A refused fact refuses the batch, naming its
        index — or, with `skip_refused`, is reported in `refused` while the others are written.

        `record(written, refused)`, in the same transaction: another aggregate to save with the facts
        (the extraction record of the message they came from, ADR 0058), or None to write nothing
        (that message was extracted meanwhile); then the result holds no facts."""
        if not facts:
            raise InvalidInput("a batch holds at least one fact")
        if len(facts) > MAX_BATCH_FACTS:
            raise InvalidInput(f"a batch holds at most {MAX_BATCH_FACTS} facts, got {len(facts)}")
        being_id = resolve_being_id(self.store, being_ref)
        owner = self.owner(being_ref, space)
        refused: list[dict[str, Any]] = []
        contents: list[tuple[int, FactContent]] = []
        for i, item in enumerate(facts):
            try:
                contents.append((i, item if isinstance(item, FactContent) else item.content()))
            except InvalidInput as exc:
                if not skip_refused:
                    if len(facts) > 1:
                        exc.details["index"] = i
                        exc.message = f"fact {i}: {exc.message}"
                        exc.args = (exc.message,)
                    raise
                refused.append(refusal(exc, i))

        def handle() -> FactsWritten:
            at = self.clock.now()
            ids = [fact_id_for_key(owner.id, fact_key(c)) for _, c in contents]
            found = self.store.find_many(Fact, ids, being_id=owner.id)
            changed: dict[UUID, Fact] = {}
            outcomes: list[tuple[Fact, str]] = []
            for fact_id, (_, content) in zip(ids, contents, strict=True):
                fact = changed.get(fact_id) or found.get(fact_id)
                if fact is None:
                    fact = Fact.state(fact_id, owner.id, owner.kind, being_id, content, at)
                    outcome = "stated"
                else:
                    outcome = fact.restate(content, being_id, at)
                changed[fact_id] = fact
                outcomes.append((fact, outcome))
            written = [
                FactWritten(
                    fact_id=str(f.id),
                    owner=owner.name,
                    owner_kind=owner.kind,
                    outcome=outcome,
                    version=f.version,
                    importance=f.importance,
                    status=f.status,
                    position=None,
                )
                for f, outcome in outcomes
            ]
            also: list[Aggregate] = []
            if record is not None:
                extra = record(written, refused)
                if extra is None:
                    return FactsWritten(facts=[], refused=refused, position=None)
                also.append(extra)
            position = self.store.save(*changed.values(), *also) if changed or also else None
            written = [w.model_copy(update={"position": position}) for w in written]
            return FactsWritten(facts=written, refused=refused, position=position)

        result = self.runner.run("state_facts", handle, being_id=being_id)
        if self.after_write is not None and result.facts:
            try:
                self.after_write(owner.id, {c.subject for _, c in contents}, result.position)
            except Exception as exc:  # the write stands; the next write of the subject archives again
                log.warning("facts.after_write_failed", owner=str(owner.id), error=repr(exc))
        return result

    def lore(self, being_ref: str, line: str, *, space: str | None = None) -> FactWritten:
        """Spec 001's lore: `Memory line: <line>.` under `__lore__`, type lore, confidence 0.72."""
        return self.state_many(being_ref, [lore_content(line)], space=space).facts[0]

    def _change(self, being_ref: str, fact_id: UUID, command: str, change: Any) -> Done:
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> Done:
            fact = self._fact(being_id, fact_id)
            change(fact)
            position = self.store.save(fact)
            return Done(position=position, details={"fact_id": str(fact.id), "status": fact.status})

        return self.runner.run(command, handle, being_id=being_id)

    def pin(self, being_ref: str, fact_id: UUID) -> Done:
        return self._change(being_ref, fact_id, "pin_fact", lambda f: f.pin(self.clock.now()))

    def unpin(self, being_ref: str, fact_id: UUID) -> Done:
        return self._change(being_ref, fact_id, "unpin_fact", lambda f: f.unpin(self.clock.now()))

    def archive(self, being_ref: str, fact_id: UUID, reason: ArchiveReason = ArchiveReason.MANUAL) -> Done:
        return self._change(being_ref, fact_id, "archive_fact", lambda f: f.archive(self.clock.now(), reason))

    # -- entities -------------------------------------------------------------------------------

    def merge_entities(self, being_ref: str, alias: str, into: str, *, space: str | None = None) -> Done:
        """`alias` reads as `into` for the being's (or its space's) facts from now on."""
        return self._entities(being_ref, space, "merge_entities", lambda m, at: m.merge(alias, into, at))

    def unmerge_entities(self, being_ref: str, alias: str, *, space: str | None = None) -> Done:
        return self._entities(being_ref, space, "unmerge_entities", lambda m, at: m.unmerge(alias, at))

    def _entities(self, being_ref: str, space: str | None, command: str, change: Any) -> Done:
        owner = self.owner(being_ref, space)

        def handle() -> Done:
            at = self.clock.now()
            map_id = entity_map_id(owner.id)
            entities = self.store.find(EntityMap, map_id) or EntityMap.start(map_id, owner.id, at)
            change(entities, at)
            return Done(position=self.store.save(entities), details={"owner": owner.name})

        return self.runner.run(command, handle, being_id=owner.id)
