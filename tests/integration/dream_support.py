"""What the entity-profile and reflection tests share (issue #12, ADR 0064, 0065)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import pytest

from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from tests.patrol_support import ScriptedLLM
from tests.support import SeededIds, SteppingClock


@pytest.fixture
def with_llm(make_settings: Callable[..., Settings], clock: SteppingClock) -> Iterator[Callable[..., Engram]]:
    opened: list[Engram] = []

    def make(llm: ScriptedLLM | None, **settings: Any) -> Engram:
        e = bootstrap(make_settings(**settings), clock=clock, ids=SeededIds(), llm=llm)
        opened.append(e)
        return e

    yield make
    for e in opened:
        e.close()


def only_steps(engram: Engram, *steps: Any) -> None:
    """The sleep phases run these steps only (the other helpers' steps are tested on their own)."""
    engram.__dict__["dream_steps"] = list(steps)


def events(engram: Engram, aggregate_id: UUID) -> list[Any]:
    return list(engram.store.log.app.repository.event_store.get(aggregate_id))
