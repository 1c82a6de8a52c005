"""The patrol process manager's state: one `PatrolRun` per being and cycle.

Every step's start and end, every skip and every LLM decision is an event, so
that a patrol killed mid-way resumes at its first unfinished step and reuses
the decisions it already paid for (#4), and auditors can see why a node died.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.ids import patrol_run_id


class PatrolStep(StrEnum):
    """The pipeline of spec 000 in order, plus the sub-cluster birth of ADR 0005."""

    NOTES_TO_NODES = "notes_to_nodes"  # ❶
    BIRTH_SUBCLUSTERS = "birth_subclusters"
    START_CYCLE = "start_cycle"  # ❷
    FLAG_DYING = "flag_dying"  # ❸
    CONSOLIDATE = "consolidate"  # ❹ (LLM)
    REVIVE = "revive"  # ❺
    SPLIT = "split"  # ❻ (LLM)
    MERGE_SMALL = "merge_small"  # ❼
    DIARY = "diary"  # diary + think_md (LLM)


class StepState(StrEnum):
    STARTED = "started"
    FINISHED = "finished"
    SKIPPED = "skipped"


class PatrolRun(BeingScopedAggregate):
    TOPIC = "engram.PatrolRun"

    class Event(Aggregate.Event):
        TOPIC = "engram.PatrolRun.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.PatrolRun.Started"
        class_version = 1
        cycle: int
        llm: str | None

    class StepStarted(Event):
        TOPIC = "engram.PatrolRun.StepStarted"
        class_version = 1
        step: str

        def apply(self, run: PatrolRun) -> None:
            run.steps[self.step] = {"state": StepState.STARTED.value, "counts": {}, "reason": None}

    class StepFinished(Event):
        TOPIC = "engram.PatrolRun.StepFinished"
        class_version = 1
        step: str
        counts: dict[str, int]
        duration_ms: float

        def apply(self, run: PatrolRun) -> None:
            run.steps[self.step] = {
                "state": StepState.FINISHED.value,
                "counts": dict(self.counts),
                "reason": None,
                "duration_ms": self.duration_ms,
            }

    class StepSkipped(Event):
        TOPIC = "engram.PatrolRun.StepSkipped"
        class_version = 1
        step: str
        reason: str

        def apply(self, run: PatrolRun) -> None:
            run.steps[self.step] = {"state": StepState.SKIPPED.value, "counts": {}, "reason": self.reason}

    class LlmDecisionRecorded(Event):
        """What a model said and what was made of it: replayed on resume, never asked twice."""

        TOPIC = "engram.PatrolRun.LlmDecisionRecorded"
        class_version = 1
        step: str
        task: str
        subject: str
        model: str
        prompt_version: str
        raw_answer: str
        parsed_plan: dict[str, Any] | None
        rejected: list[dict[str, Any]]

        def apply(self, run: PatrolRun) -> None:
            run.decisions[f"{self.task}:{self.subject}"] = {
                "step": self.step,
                "task": self.task,
                "subject": self.subject,
                "model": self.model,
                "prompt_version": self.prompt_version,
                "raw_answer": self.raw_answer,
                "parsed_plan": self.parsed_plan,
                "rejected": list(self.rejected),
            }

    class Finished(Event):
        TOPIC = "engram.PatrolRun.Finished"
        class_version = 1

        def apply(self, run: PatrolRun) -> None:
            run.finished = True

    def __init__(self, being_id: UUID, cycle: int, llm: str | None) -> None:
        self.being_id = being_id
        self.cycle = cycle
        self.llm = llm
        self.steps: dict[str, dict[str, Any]] = {}
        self.decisions: dict[str, dict[str, Any]] = {}
        self.finished = False

    @classmethod
    def start(cls, being_id: UUID, cycle: int, llm: str | None, at: datetime) -> PatrolRun:
        if cycle < 1:
            raise InvalidInput("patrol cycles count from 1")
        return cls._create(
            cls.Started,
            id=patrol_run_id(being_id, cycle),
            being_id=being_id,
            cycle=cycle,
            llm=llm,
            timestamp=at,
        )

    def step_state(self, step: PatrolStep) -> StepState | None:
        entry = self.steps.get(step.value)
        return StepState(entry["state"]) if entry else None

    def is_done(self, step: PatrolStep) -> bool:
        return self.step_state(step) in (StepState.FINISHED, StepState.SKIPPED)

    def next_step(self) -> PatrolStep | None:
        for step in PatrolStep:
            if not self.is_done(step):
                return step
        return None

    def decision(self, task: str, subject: str) -> dict[str, Any] | None:
        return self.decisions.get(f"{task}:{subject}")

    def _require_open(self) -> None:
        if self.finished:
            raise InvalidTransition(f"patrol run of cycle {self.cycle} has finished")

    def start_step(self, step: PatrolStep, at: datetime) -> None:
        self._require_open()
        if self.is_done(step):
            raise InvalidTransition(f"step {step.value} of cycle {self.cycle} is already done")
        if self.step_state(step) != StepState.STARTED:
            self._emit(self.StepStarted, at, step=step.value)

    def finish_step(self, step: PatrolStep, counts: dict[str, int], duration_ms: float, at: datetime) -> None:
        self._require_open()
        if self.step_state(step) != StepState.STARTED:
            raise InvalidTransition(f"step {step.value} was not started")
        self._emit(self.StepFinished, at, step=step.value, counts=dict(counts), duration_ms=duration_ms)

    def skip_step(self, step: PatrolStep, reason: str, at: datetime) -> None:
        self._require_open()
        if self.is_done(step):
            raise InvalidTransition(f"step {step.value} of cycle {self.cycle} is already done")
        self._emit(self.StepSkipped, at, step=step.value, reason=reason)

    def record_decision(
        self,
        step: PatrolStep,
        task: str,
        subject: str,
        *,
        model: str,
        prompt_version: str,
        raw_answer: str,
        parsed_plan: dict[str, Any] | None,
        rejected: list[dict[str, Any]],
        at: datetime,
    ) -> None:
        self._require_open()
        if self.decision(task, subject) is not None:
            raise InvalidTransition(f"decision {task} for {subject} is already recorded")
        self._emit(
            self.LlmDecisionRecorded,
            at,
            step=step.value,
            task=task,
            subject=subject,
            model=model,
            prompt_version=prompt_version,
            raw_answer=raw_answer,
            parsed_plan=parsed_plan,
            rejected=list(rejected),
        )

    def finish(self, at: datetime) -> None:
        self._require_open()
        missing = [s.value for s in PatrolStep if not self.is_done(s)]
        if missing:
            raise InvalidTransition(f"patrol run cannot finish: steps {missing} are not done")
        self._emit(self.Finished, at)
