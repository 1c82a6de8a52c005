"""What the entity-profile and reflection tests share (issue #12, ADR 0064, 0065)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.services.bootstrap import Engram


def only_steps(engram: Engram, *steps: Any) -> None:
    """The sleep phases run these steps only (the other helpers' steps are tested on their own)."""
    engram.__dict__["dream_steps"] = list(steps)


def events(engram: Engram, aggregate_id: UUID) -> list[Any]:
    return list(engram.store.log.app.repository.event_store.get(aggregate_id))
