"""Plain-JSON views of events and aggregate state, for auditors and interfaces."""

from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from engram.domain.embedding import Embedding

_EVENT_META = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def jsonable(value: Any) -> Any:
    if value is None or (isinstance(value, bool | int | float | str) and not isinstance(value, enum.Enum)):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if isinstance(value, Embedding):
        # The vector itself is bulk; auditors get its identity. `engram show --vector` could add it.
        return {"model": value.model, "dim": value.dim}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def event_payload(event: Any) -> dict[str, Any]:
    return {k: jsonable(v) for k, v in vars(event).items() if k not in _EVENT_META}


def event_topic(event: Any) -> str:
    """The event's stable topic, e.g. `engram.Note.Noted`; an erased event keeps the one it had."""
    erased = getattr(event, "erased_topic", None)
    return str(erased) if erased is not None else str(type(event).TOPIC)


def event_type(event: Any) -> str:
    """The event's short name, e.g. `MemoryNode.FlaggedDying`."""
    return str(type(event).__qualname__)


def aggregate_state(agg: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "id": str(agg.id),
        "version": agg.version,
        "created_on": agg.created_on.isoformat(),
        "modified_on": agg.modified_on.isoformat(),
    }
    for key, value in vars(agg).items():
        if not key.startswith("_"):
            state[key] = jsonable(value)
    return state
