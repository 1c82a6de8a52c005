"""What fact extraction did with each message (issue #11, ADR 0058), recorded.

`Extraction` is one message's record; its id derives from the message's id, so a message is
extracted once: two extractors at once race on its first version and the second finds it done.
It holds what the LLM answered (capped), the facts accepted with their outcome, and each candidate
refused with its reason — or that the LLM could not be reached (`Failed`, asked again later, at most
`MAX_ATTEMPTS` times).

`ExtractionCursor` is a being's: without an LLM, a run records once that extraction was skipped for
the messages up to a log position, not one event per message, so an offline deployment's log does
not grow with skips.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidTransition

MAX_ATTEMPTS = 3  # failed LLM calls for one message before it is left failed
MAX_CANDIDATE_CHARS = 600  # what is kept of a refused candidate
MAX_REASON_CHARS = 300


def capped_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Extraction(BeingScopedAggregate):
    TOPIC = "engram.Extraction"

    class Event(Aggregate.Event):
        TOPIC = "engram.Extraction.Event"
        being_id: UUID

    class Opened(Event, Aggregate.Created):
        TOPIC = "engram.Extraction.Opened"
        class_version = 1
        message_id: UUID

    class Extracted(Event):
        """`accepted`: `{fact_id, outcome}` (stated, reinforced, revised); `rejected`: `{candidate,
        code, reason}` — each guard's refusal, and the facts the domain refused."""

        TOPIC = "engram.Extraction.Extracted"
        class_version = 1
        message_id: UUID
        model: str
        prompt_version: str
        answer: str | None
        accepted: list[dict[str, Any]]
        rejected: list[dict[str, Any]]

        def apply(self, x: Extraction) -> None:
            x.done = True

    class Failed(Event):
        TOPIC = "engram.Extraction.Failed"
        class_version = 1
        message_id: UUID
        reason: str
        attempts: int

        def apply(self, x: Extraction) -> None:
            x.attempts = self.attempts

    def __init__(self, being_id: UUID, message_id: UUID) -> None:
        self.being_id = being_id
        self.message_id = message_id
        self.done = False
        self.attempts = 0

    @classmethod
    def open(cls, extraction_id: UUID, being_id: UUID, message_id: UUID, at: datetime) -> Extraction:
        x: Extraction = cls._create(
            cls.Opened, id=extraction_id, being_id=being_id, timestamp=at, message_id=message_id
        )
        return x

    @property
    def settled(self) -> bool:
        """Nothing more to do: extracted, or failed as often as it may."""
        return self.done or self.attempts >= MAX_ATTEMPTS

    def extracted(
        self,
        *,
        model: str,
        prompt_version: str,
        answer: str | None,
        accepted: list[dict[str, Any]],
        rejected: list[dict[str, Any]],
        at: datetime,
    ) -> None:
        if self.settled:
            raise InvalidTransition(f"message {self.message_id} was extracted already")
        rejected = [
            {
                "candidate": capped_text(str(r.get("candidate", "")), MAX_CANDIDATE_CHARS),
                "code": str(r.get("code", "other")),
                "reason": capped_text(str(r["reason"]), MAX_REASON_CHARS),
            }
            for r in rejected
        ]
        self._emit(
            self.Extracted,
            at,
            message_id=self.message_id,
            model=model,
            prompt_version=prompt_version,
            answer=answer,
            accepted=accepted,
            rejected=rejected,
        )

    def failed(self, reason: str, at: datetime) -> None:
        if self.settled:
            raise InvalidTransition(f"message {self.message_id} was extracted already")
        self._emit(
            self.Failed,
            at,
            message_id=self.message_id,
            reason=capped_text(reason, MAX_REASON_CHARS),
            attempts=self.attempts + 1,
        )


class ExtractionCursor(BeingScopedAggregate):
    TOPIC = "engram.ExtractionCursor"

    class Event(Aggregate.Event):
        TOPIC = "engram.ExtractionCursor.Event"
        being_id: UUID

    class Opened(Event, Aggregate.Created):
        TOPIC = "engram.ExtractionCursor.Opened"
        class_version = 1

    class Skipped(Event):
        """Extraction skipped for the being's messages up to log position `upto_position`."""

        TOPIC = "engram.ExtractionCursor.Skipped"
        class_version = 1
        reason: str
        upto_position: int

        def apply(self, c: ExtractionCursor) -> None:
            c.skipped_upto = self.upto_position

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.skipped_upto = 0

    @classmethod
    def open(cls, cursor_id: UUID, being_id: UUID, at: datetime) -> ExtractionCursor:
        c: ExtractionCursor = cls._create(cls.Opened, id=cursor_id, being_id=being_id, timestamp=at)
        return c

    def skip(self, reason: str, upto_position: int, at: datetime) -> bool:
        """Record the skip if it reaches further than the last one; whether it was recorded."""
        if upto_position <= self.skipped_upto:
            return False
        self._emit(self.Skipped, at, reason=reason, upto_position=upto_position)
        return True
