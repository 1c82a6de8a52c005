"""What every patrol step works with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
import structlog
from pydantic import BaseModel

from engram.domain.being import Being
from engram.domain.patrol_run import PatrolRun
from engram.projections.queries import ReadModels
from engram.projections.vectors import VectorQueries
from engram.services.llm_answers import DEFAULT_MAX_ANSWER_KIB
from engram.services.patrol.asking import Asked, ask
from engram.services.ports import LLM, Clock, Embedder, IdFactory, ModelClass
from engram.services.store import AggregateStore
from engram.services.thresholds import Thresholds
from engram.services.views import Views

log = structlog.get_logger("engram.patrol")

SAVE_BATCH = 200
EPS = 1e-9  # the vector port keeps scores strictly above a threshold; the spec says "≥"


@dataclass
class Skip:
    reason: str


@dataclass
class StepContext:
    store: AggregateStore
    views: Views
    embedder: Embedder
    llm: LLM | None
    clock: Clock
    ids: IdFactory
    thresholds: Thresholds
    being_id: UUID
    run_id: UUID
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_KIB * 1024
    counts: dict[str, int] = field(default_factory=dict)
    progress: Callable[[int, int], None] | None = None
    """Told `(done, total)` as a long step goes: the CLI shows it while the patrol runs."""

    @property
    def read(self) -> ReadModels:
        return self.views.read

    @property
    def vectors(self) -> VectorQueries:
        return self.views.vectors

    @property
    def model(self) -> str:
        return self.embedder.model_id

    def being(self) -> Being:
        return self.store.get(Being, self.being_id)

    def run(self) -> PatrolRun:
        return self.store.get(PatrolRun, self.run_id)

    def save(self, *aggregates: Any) -> int | None:
        """Save in one transaction, then let the views catch up: a step never reads older than its writes."""
        position = self.store.save(*aggregates)
        if position is not None:
            self.views.ensure(position)
        return position

    def advance(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)

    def ask(self, task: str, prompt: str, schema: type[BaseModel], model_class: ModelClass) -> Asked:
        """Ask the step's LLM (there must be one), its recorded answer held to the configured cap."""
        assert self.llm is not None
        return ask(self.llm, task, prompt, schema, model_class, max_answer_bytes=self.max_answer_bytes)

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    @staticmethod
    def vec(data: bytes) -> npt.NDArray[np.float32]:
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
