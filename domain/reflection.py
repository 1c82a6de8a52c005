"""Reflection (Generative Agents, spec 003, issue #12, ADR 0065): when the importance a being gathered
since its last reflection reaches `REFLECTION_THRESHOLD`, questions from its recent important memories,
answered into insights that become high-importance notes linked to their sources.

`Reflections` is one aggregate per being: it records each reflection (questions, insights, their
sources, the notes they became, the model's answers) and the log position reflected up to — the
counter's reset: the next reflection adds up importance after it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate

REFLECTION_THRESHOLD = 150
"""Spec 003's threshold, on the 1–10 scale every memory maps onto (`domain/importance.py`)."""
INSIGHT_POIGNANCY = 8
"""An insight's importance on the 1–10 scale (its node's 0–1 importance is `poignancy_to_node_importance`)."""
MAX_QUESTIONS = 3
MAX_INSIGHTS = 5
MAX_SOURCES = 12
"""Memories a reflection is asked about: the most important since the last one."""
MAX_INSIGHT_CHARS = 400
MAX_QUESTION_CHARS = 200


def reflections_id_for(being_id: UUID) -> UUID:
    return uuid5(being_id, "reflections")


class Reflections(BeingScopedAggregate):
    TOPIC = "engram.Reflections"

    class Event(Aggregate.Event):
        TOPIC = "engram.Reflections.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.Reflections.Started"
        class_version = 1

    class Reflected(Event):
        """Reflection `number` over what came in up to `up_to_position` (`importance` gathered)."""

        TOPIC = "engram.Reflections.Reflected"
        class_version = 1
        number: int
        up_to_position: int
        importance: int
        questions: list[str]
        insights: list[dict[str, Any]]  # {text, sources: [memory ids], note_id}
        sources: list[dict[str, Any]]  # {id, kind, poignancy}: what it was asked about
        model: str
        prompt_version: str
        answers: list[str]  # the model's answers (capped): questions, insights

        def apply(self, r: Reflections) -> None:
            r.count = self.number
            r.up_to_position = self.up_to_position
            r.refused = None

    class Refused(Event):
        """An answer that could not be kept (capped); asked again next tick."""

        TOPIC = "engram.Reflections.Refused"
        class_version = 1
        reason: str
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, r: Reflections) -> None:
            r.refused = self.reason

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.count = 0
        self.up_to_position = 0
        self.refused: str | None = None

    @classmethod
    def start(cls, being_id: UUID, at: datetime) -> Reflections:
        r: Reflections = cls._create(
            cls.Started, id=reflections_id_for(being_id), being_id=being_id, timestamp=at
        )
        return r

    def reflect(
        self,
        *,
        up_to_position: int,
        importance: int,
        questions: list[str],
        insights: list[dict[str, Any]],
        sources: list[dict[str, Any]],
        model: str,
        prompt_version: str,
        answers: list[str],
        at: datetime,
    ) -> bool:
        """False when it reflected up to there already (a re-run tick)."""
        if up_to_position <= self.up_to_position:
            return False
        self._emit(
            self.Reflected,
            at,
            number=self.count + 1,
            up_to_position=up_to_position,
            importance=importance,
            questions=questions,
            insights=insights,
            sources=sources,
            model=model,
            prompt_version=prompt_version,
            answers=answers,
        )
        return True

    def refuse(self, reason: str, model: str, prompt_version: str, answer: str | None, at: datetime) -> None:
        self._emit(self.Refused, at, reason=reason, model=model, prompt_version=prompt_version, answer=answer)
