"""Engram: event-sourced long-term memory for AI agents.

The public Python API::

    import engram

    with engram.open("./engram-data") as memory:
        memory.beings.register("Aria")
        ...

`engram.open` takes the same settings as the CLI (`ENGRAM_*` variables, keyword overrides) and
returns an `Engram`, the application wired by the composition root. Errors are `engram.DomainError`
subclasses with a `code`. The layers live in the subpackages `engram.domain`, `engram.services`,
`engram.projections` and `engram.adapters` (docs/architecture.md).

Importing `engram` loads nothing heavy: the names below are imported on first use, so that
`import engram.domain.node` (or a child process) does not pay for the whole application.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.domain.errors import DomainError, InvalidInput
    from engram.services.api import (
        ConfigurationError,
        Engram,
        FactInput,
        MessageInput,
        NoteInput,
        Settings,
        open,
    )
    from engram.services.errors import Conflict, NotFound

__all__ = [
    "ConfigurationError",
    "Conflict",
    "DomainError",
    "Engram",
    "FactInput",
    "InvalidInput",
    "MessageInput",
    "NotFound",
    "NoteInput",
    "Settings",
    "open",
]

_HOMES = {
    "open": "engram.services.api",
    "ConfigurationError": "engram.services.config",
    "Engram": "engram.services.api",
    "MessageInput": "engram.services.api",
    "FactInput": "engram.services.api",
    "NoteInput": "engram.services.api",
    "Settings": "engram.services.api",
    "DomainError": "engram.domain.errors",
    "InvalidInput": "engram.domain.errors",
    "NotFound": "engram.services.errors",
    "Conflict": "engram.services.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
