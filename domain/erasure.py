"""Erasure (crypto-shredding, ADR 0073/0074): the receipt an erasure leaves in the log, and what an
event whose key was destroyed reads as.

The receipt names what was erased, when, by whom and how much: never the content. It is stored in
clear (`stored_in_clear`), so it outlives the key it reports destroyed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.errors import DomainError


def being_erasure_id(being_id: UUID) -> UUID:
    """The receipt of a being's erasure: one per being, so that an erasure interrupted after its key
    was destroyed is found unfinished (no receipt yet) and completed by the next `forget`."""
    return uuid5(being_id, "erasure:being")


class ContentErased(DomainError):
    """An aggregate was asked of events whose content was erased."""


class ErasedContent:
    """An event of the log whose key was destroyed: it existed (id, version, position, topic, being)
    but its content is gone. No projection handles this type, so replays and rebuilds skip it."""

    def __init__(self, originator_id: UUID, originator_version: int, being_id: UUID, topic: str) -> None:
        self.originator_id = originator_id
        self.originator_version = originator_version
        self.being_id = being_id
        self.erased_topic = topic
        self.timestamp: datetime | None = None

    def mutate(self, aggregate: Any) -> Any:
        if aggregate is not None and self.erased_topic in getattr(type(aggregate), "ERASABLE_TOPICS", ()):
            # An event its aggregate can lose (a conversation's summary under a key of its own, ADR
            # 0093): the aggregate goes on as if it had not happened, at its version.
            aggregate.version = self.originator_version
            return aggregate
        raise ContentErased(
            f"{self.originator_id} was erased: its key was destroyed "
            "(its being, its user or the item itself was forgotten)"
        )

    def __repr__(self) -> str:
        return f"ErasedContent({self.originator_id}, v{self.originator_version}, {self.erased_topic})"


class Erasure(Aggregate):
    """One erasure, as a receipt."""

    TOPIC = "engram.Erasure"

    class Event(Aggregate.Event):
        TOPIC = "engram.Erasure.Event"
        stored_in_clear: ClassVar[bool] = True  # the receipt outlives the key it reports destroyed

    class Erased(Event, Aggregate.Created):
        TOPIC = "engram.Erasure.Erased"
        class_version = 1
        being_id: UUID
        scope: str
        target: str
        by: str
        counts: dict[str, int]

    def __init__(self, being_id: UUID, scope: str, target: str, by: str, counts: dict[str, int]) -> None:
        self.being_id = being_id
        self.scope = scope
        self.target = target
        self.by = by
        self.counts = dict(counts)

    @classmethod
    def record(
        cls,
        erasure_id: UUID,
        being_id: UUID,
        scope: str,
        target: str,
        by: str,
        counts: dict[str, int],
        at: datetime,
    ) -> Erasure:
        return cls._create(
            cls.Erased,
            id=erasure_id,
            being_id=being_id,
            scope=scope,
            target=target,
            by=by,
            counts=dict(counts),
            timestamp=at,
        )
