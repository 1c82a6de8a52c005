"""Undo (ADR 0072): one recorded decision reversed, with its reason and what it touched.

An `Undo` has a deterministic id per decision, so that a second undo of the same decision finds the
first one and is refused, and the compensating events on the affected aggregates are saved with it
in one transaction.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput


def undo_id_for(being_id: UUID, decision: str) -> UUID:
    return uuid5(being_id, "undo:" + decision)


class Undo(BeingScopedAggregate):
    TOPIC = "engram.Undo"

    class Event(Aggregate.Event):
        TOPIC = "engram.Undo.Event"
        being_id: UUID

    class Recorded(Event, Aggregate.Created):
        """`decision` is the decision's id (`ID@VERSION`, ADR 0072); `cascade_of` the decision
        whose undo asked for this one first, if any."""

        TOPIC = "engram.Undo.Recorded"
        class_version = 1
        decision: str
        kind: str
        reason: str
        affected: list[str]
        cascade_of: str | None

    def __init__(
        self,
        being_id: UUID,
        decision: str,
        kind: str,
        reason: str,
        affected: list[str],
        cascade_of: str | None,
    ) -> None:
        self.being_id = being_id
        self.decision = decision
        self.kind = kind
        self.reason = reason
        self.affected = affected
        self.cascade_of = cascade_of

    @classmethod
    def record(
        cls,
        being_id: UUID,
        decision: str,
        kind: str,
        reason: str,
        affected: list[str],
        at: datetime,
        *,
        cascade_of: str | None = None,
    ) -> Undo:
        if not reason.strip():
            raise InvalidInput("an undo needs a reason")
        return cls._create(
            cls.Recorded,
            id=undo_id_for(being_id, decision),
            being_id=being_id,
            decision=decision,
            kind=kind,
            reason=reason,
            affected=list(affected),
            cascade_of=cascade_of,
            timestamp=at,
        )
