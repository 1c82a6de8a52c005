"""Which soul note is a being's current one (spec 002: a new soul supersedes the last; ADR 0047).

One `SoulChain` per being, with an id derived from the being's: every soul note taken for the being
moves it in the same transaction. Two souls taken at once both write its next version; the log takes
one, the other command runs again and finds the first soul here, so it supersedes it. The notes view
could not give that: a soul not yet committed is in no view.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate


class SoulChain(BeingScopedAggregate):
    TOPIC = "engram.SoulChain"

    class Event(Aggregate.Event):
        TOPIC = "engram.SoulChain.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.SoulChain.Started"
        class_version = 1

    class Moved(Event):
        """`note_id` is the being's soul from now on."""

        TOPIC = "engram.SoulChain.Moved"
        class_version = 1
        note_id: UUID

        def apply(self, chain: SoulChain) -> None:
            chain.current = self.note_id

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.current: UUID | None = None

    @classmethod
    def start(cls, chain_id: UUID, being_id: UUID, at: datetime) -> SoulChain:
        chain: SoulChain = cls._create(cls.Started, id=chain_id, being_id=being_id, timestamp=at)
        return chain

    def move(self, note_id: UUID, at: datetime) -> None:
        self._emit(self.Moved, at, note_id=note_id)
