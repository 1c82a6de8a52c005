"""The LLM's importance scores for a batch of a being's memories (spec 003's compacting, issue #12,
ADR 0061), recorded.

During compacting, sleep's `importance` step asks the LLM to score the being's memories still scored
by the heuristic, a batch at a time. One `ImportanceScoring` is one batch: its id derives from the
being and the batch's memory ids (`scoring_id_for`), so a tick killed after asking and run again finds
the batch scored and writes nothing twice. It holds what the LLM answered (capped), the prompt version
and the model — the `importance` view applies the scores (`method: llm`) from `Scored` alone, so a
rebuild never calls an LLM. A refused answer (`Refused`: HTML, empty, wrong shape, oversized, ids it
was not asked about, scores out of range, an instruction) is recorded and the batch is asked again at
the next tick, at most `MAX_ATTEMPTS` times; after that its memories keep their heuristic scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidTransition
from engram.domain.extraction import MAX_REASON_CHARS, capped_text
from engram.domain.importance import POIGNANCY_MAX, POIGNANCY_MIN

MAX_ATTEMPTS = 3
"""Refused answers for one batch (or one memory left out of answers) before it keeps its heuristic."""


def scoring_id_for(being_id: UUID, memory_ids: Sequence[str]) -> UUID:
    return uuid5(being_id, "importance-scoring:" + ",".join(sorted(memory_ids)))


class ImportanceScoring(BeingScopedAggregate):
    TOPIC = "engram.ImportanceScoring"

    class Event(Aggregate.Event):
        TOPIC = "engram.ImportanceScoring.Event"
        being_id: UUID

    class Opened(Event, Aggregate.Created):
        TOPIC = "engram.ImportanceScoring.Opened"
        class_version = 1
        memory_ids: list[str]

    class Scored(Event):
        """`scores`: memory id → poignancy 1–10; `missing`: memories asked about that the answer left
        out (asked again in a later batch)."""

        TOPIC = "engram.ImportanceScoring.Scored"
        class_version = 1
        scores: dict[str, int]
        missing: list[str]
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, s: ImportanceScoring) -> None:
            s.done = True

    class Refused(Event):
        """The answer could not be used (`code`, `reason`); the batch is asked again next tick."""

        TOPIC = "engram.ImportanceScoring.Refused"
        class_version = 1
        memory_ids: list[str]
        code: str
        reason: str
        model: str
        prompt_version: str
        answer: str | None
        attempts: int

        def apply(self, s: ImportanceScoring) -> None:
            s.attempts = self.attempts

    def __init__(self, being_id: UUID, memory_ids: list[str]) -> None:
        self.being_id = being_id
        self.memory_ids = memory_ids
        self.done = False
        self.attempts = 0

    @classmethod
    def open(cls, being_id: UUID, memory_ids: Sequence[str], at: datetime) -> ImportanceScoring:
        ids = list(memory_ids)
        s: ImportanceScoring = cls._create(
            cls.Opened, id=scoring_id_for(being_id, ids), being_id=being_id, timestamp=at, memory_ids=ids
        )
        return s

    @property
    def settled(self) -> bool:
        return self.done or self.attempts >= MAX_ATTEMPTS

    def _check_open(self) -> None:
        if self.settled:
            raise InvalidTransition(f"importance batch {self.id} is settled already")

    def scored(
        self, scores: dict[str, int], *, model: str, prompt_version: str, answer: str | None, at: datetime
    ) -> None:
        self._check_open()
        asked = set(self.memory_ids)
        unknown = sorted(set(scores) - asked)
        if unknown:
            raise InvalidTransition(f"scores for memories not in the batch: {', '.join(unknown[:3])}")
        if any(not POIGNANCY_MIN <= v <= POIGNANCY_MAX for v in scores.values()):
            raise InvalidTransition("a score lies outside 1-10")
        self._emit(
            self.Scored,
            at,
            scores=dict(scores),
            missing=[m for m in self.memory_ids if m not in scores],
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def refused(
        self, code: str, reason: str, *, model: str, prompt_version: str, answer: str | None, at: datetime
    ) -> None:
        self._check_open()
        self._emit(
            self.Refused,
            at,
            memory_ids=list(self.memory_ids),
            code=code,
            reason=capped_text(reason, MAX_REASON_CHARS),
            model=model,
            prompt_version=prompt_version,
            answer=answer,
            attempts=self.attempts + 1,
        )
