"""A-MEM links (spec 003 dreaming step 1, issue #12, ADR 0062): which of a being's memories are
alike, with the cosine similarity that made them so.

One `MemoryLinks` per memory (a node or a fact of the being), id `links_id_for(being, memory)`: its
creation is the memory's linking (`Linked`: the links it found to older memories, their scores, the
threshold and model, `processed_at`), so a tick killed halfway and run again finds the aggregate
and writes nothing twice. A link is recorded once, by the memory that was linked later; the `links`
view reads it from both ends. `Unlinked` removes links whose other end (or this memory) was
archived, died, expired or was erased, with the reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput

LINK_THRESHOLD = 0.7
"""Spec 003: memories with cosine similarity at least this are linked (ADR 0062)."""
MAX_LINKS_PER_MEMORY = 10
"""A-MEM's k: at most this many links found by one memory (the nearest)."""

SCORE_TOLERANCE = 1e-6
"""Cosine scores come from float32 vectors: a pair at the threshold may read a hair below it."""

MEMORY_KINDS = frozenset({"node", "fact"})
GONE_REASONS = frozenset({"archived", "died", "expired", "erased"})


def links_id_for(being_id: UUID, memory_id: UUID) -> UUID:
    return uuid5(being_id, f"links:{memory_id}")


class MemoryLinks(BeingScopedAggregate):
    """The links a memory found when it was linked, less those removed since."""

    TOPIC = "engram.MemoryLinks"

    class Event(Aggregate.Event):
        TOPIC = "engram.MemoryLinks.Event"
        being_id: UUID

    class Linked(Event, Aggregate.Created):
        """The memory was linked: `links` are `{id, kind, score}` of the memories it is like (maybe
        none), `processed_at` when (the tick's time)."""

        TOPIC = "engram.MemoryLinks.Linked"
        class_version = 1
        memory_id: UUID
        memory_kind: str
        links: list[dict[str, Any]]
        threshold: float
        model: str
        processed_at: datetime

    class Unlinked(Event):
        """Links removed because an end was archived, died, expired or was erased."""

        TOPIC = "engram.MemoryLinks.Unlinked"
        class_version = 1
        memory_id: UUID
        other_ids: list[str]
        reason: str

        def apply(self, agg: MemoryLinks) -> None:
            gone = set(self.other_ids)
            agg.links = [link for link in agg.links if link["id"] not in gone]

    def __init__(
        self,
        being_id: UUID,
        memory_id: UUID,
        memory_kind: str,
        links: list[dict[str, Any]],
        threshold: float,
        model: str,
        processed_at: datetime,
    ) -> None:
        self.being_id = being_id
        self.memory_id = memory_id
        self.memory_kind = memory_kind
        self.links = [dict(link) for link in links]
        self.threshold = threshold
        self.model = model
        self.processed_at = processed_at

    @classmethod
    def link(
        cls,
        being_id: UUID,
        memory_id: UUID,
        memory_kind: str,
        links: list[dict[str, Any]],
        *,
        threshold: float,
        model: str,
        at: datetime,
    ) -> MemoryLinks:
        if memory_kind not in MEMORY_KINDS:
            raise InvalidInput(f"a memory is a node or a fact, not {memory_kind!r}", field="memory_kind")
        clean = []
        for link in links:
            if link["kind"] not in MEMORY_KINDS or str(link["id"]) == str(memory_id):
                raise InvalidInput("a link joins two different memories", field="links")
            if float(link["score"]) < threshold - SCORE_TOLERANCE:
                raise InvalidInput(f"a link's score is at least {threshold}", field="links")
            clean.append(
                {"id": str(link["id"]), "kind": link["kind"], "score": round(float(link["score"]), 6)}
            )
        return cls._create(
            cls.Linked,
            id=links_id_for(being_id, memory_id),
            being_id=being_id,
            memory_id=memory_id,
            memory_kind=memory_kind,
            links=clean,
            threshold=threshold,
            model=model,
            processed_at=at,
            timestamp=at,
        )

    def linked_to(self, other_id: UUID | str) -> bool:
        return any(link["id"] == str(other_id) for link in self.links)

    def unlink(self, other_ids: list[str], reason: str, at: datetime) -> bool:
        """Remove the links to `other_ids` that are still there; False when none was."""
        if reason not in GONE_REASONS:
            raise InvalidInput(
                f"a link is removed when an end is {', '.join(sorted(GONE_REASONS))}", field="reason"
            )
        present = sorted({str(o) for o in other_ids if self.linked_to(o)})
        if not present:
            return False
        self._emit(self.Unlinked, at, memory_id=self.memory_id, other_ids=present, reason=reason)
        return True
