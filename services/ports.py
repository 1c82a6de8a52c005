"""Ports: what the application needs from the outside world, and what its services need of it.

Adapters in `adapters/` implement the first kind; the composition root (`services.bootstrap`) picks
them from configuration and wires the application object (`Engram`), which the services reach
through the second kind (`Reads`, `Patrols`, …). Nothing here performs I/O itself. The projections
own the ports they consume (`projections/sql.py`, `projections/vector_index.py`,
`projections/fulltext/port.py`, `projections/engine/source.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, runtime_checkable
from uuid import UUID

from pydantic import BaseModel

from engram.domain.embedding import Embedding
from engram.projections.engine.source import EventSource
from engram.projections.sql import ViewDatabase
from engram.services.errors import EmbedderError as EmbedderError  # the Embedder port's error

# The ports name eventsourcing's types in annotations only: an adapter that needs only a port's error
# (the embedders') loads no event store, and the mem0 side of `engram bench memory` runs without one.
if TYPE_CHECKING:
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate
    from eventsourcing.persistence import Notification, Recording, StoredEvent

    from engram.services.config import Settings
    from engram.services.patrol.run import PatrolReport
    from engram.services.runner import CommandRunner
    from engram.services.store import AggregateStore
    from engram.services.views import Views


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...


class IdFactory(Protocol):
    def new_id(self) -> UUID: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one model.

    `model_id` names the model and dimension (e.g. `minilm-l6-v2-int8`), so
    that vectors of different embedders are never mixed.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """One vector per text, in order. Implementations batch internally."""
        ...


ModelClass = Literal["fast", "reasoning"]

T = TypeVar("T", bound=BaseModel)


class LLMAnswer(BaseModel):
    """What a model answered: the raw text is kept for the audit trail, `parsed` is validated."""

    model: str
    raw: str
    parsed: BaseModel

    model_config = {"arbitrary_types_allowed": True}


class LLMError(Exception):
    """Base of LLM failures. `retryable` marks rate limits, 5xx and timeouts."""

    retryable = False


class LLMUnavailable(LLMError):
    """No key configured: the LLM steps are skipped."""


class LLMTransientError(LLMError):
    retryable = True


class LLMMalformedAnswer(LLMError):
    """The model answered, but not in the requested schema. `raw` keeps what it said."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class LLMAnswerTooLarge(LLMMalformedAnswer):
    """The answer is longer than the configured cap: never parsed; `raw` holds its first bytes, cut marked."""

    code = "llm_answer_too_large"

    def __init__(self, message: str, raw: str, size: int) -> None:
        super().__init__(message, raw)
        self.size = size


BadResponseKind = Literal["empty", "not_json", "wrong_shape"]


class LLMBadResponse(LLMError):
    """The server answered, but with no answer in it: an HTML page, an empty or non-JSON body, or JSON
    of the wrong shape. Raised once the adapter's retries for that kind are spent (ADR 0026)."""

    code = "llm_bad_response"

    def __init__(
        self, message: str, *, kind: BadResponseKind, status: int, content_type: str, first_bytes: str
    ) -> None:
        super().__init__(message)
        self.kind: BadResponseKind = kind
        self.status = status
        self.content_type = content_type
        self.first_bytes = first_bytes


class LLM(Protocol):
    """Structured-output completion. `task` names the schema (e.g. `consolidate_cluster`)."""

    @property
    def available(self) -> bool: ...

    def describe(self) -> str:
        """Provider and model, e.g. `anthropic:claude-sonnet-4-6`; never a secret."""
        ...

    def model_for(self, model_class: ModelClass) -> str: ...

    def complete(
        self,
        *,
        task: str,
        system: str,
        prompt: str,
        schema: type[T],
        model_class: ModelClass,
    ) -> LLMAnswer:
        """Ask for an answer that validates against `schema`.

        Raises `LLMMalformedAnswer` when the answer does not validate
        (`LLMAnswerTooLarge` when it is over the adapter's cap, unparsed),
        `LLMBadResponse` when the server's body holds no answer at all,
        `LLMTransientError` for rate limits, 5xx and timeouts (after the
        adapter's own bounded retries), `LLMUnavailable` without a key.
        """
        ...


# -- the event log and the views' storage ---------------------------------------------------------


class EventStore(EventSource, Protocol):
    """The event log as the aggregate store uses it (adapters/eventstore/log_access.py)."""

    @property
    def app(self) -> Application[UUID]:
        """The `eventsourcing` application: its repository and its log."""
        ...

    @property
    def batch_reads(self) -> bool:
        """Whether aggregates load in batches (`latest_snapshots`, `records_after`)."""
        ...

    def latest_snapshots(self, ids: Sequence[UUID]) -> dict[UUID, StoredEvent]: ...

    def records_after(self, after: Mapping[UUID, int]) -> dict[UUID, list[StoredEvent]]: ...

    def save(self, aggregates: Sequence[Aggregate], *, durable: bool) -> list[Recording[UUID]]: ...

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]: ...

    def decode(self, notification: Notification) -> object: ...

    def positions(self, aggregate_id: UUID) -> dict[int, int]:
        """Each version of one aggregate with its log position."""
        ...


class ViewStorage(Protocol):
    """Where the views live: a database per view (a SQLite file, or a table prefix in PostgreSQL)."""

    def database(self, name: str) -> ViewDatabase: ...

    def close(self) -> None: ...


class TableScrub(Protocol):
    """Makes the bytes of deleted view rows unrecoverable from the files of their tables (ADR 0077):
    PostgreSQL keeps dead tuples, and the free space of its pages, until the table is rewritten."""

    def scrub_tables(self, tables: Sequence[str]) -> list[str]:
        """Rewrite `tables` (physical names) so no deleted row is left in their files; returns what
        was rewritten (none where the store scrubs its files otherwise, as SQLite's VACUUM)."""
        ...


class Lock(Protocol):
    """An exclusive lock that dies with its process (adapters/locks.py)."""

    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...


class HeldLock(Lock, Protocol):
    """A lock that keeps what it locks with (a file, a connection) open between acquisitions."""

    def close(self) -> None: ...


class Locks(Protocol):
    """Locks shared by every process of a deployment."""

    def view_lock(self, view: str, purpose: str) -> Lock:
        """`purpose` "process": whoever applies the view's events; "rebuild": whoever rebuilds it."""
        ...

    def held_view_lock(self, view: str, purpose: str) -> HeldLock: ...

    def named_lock(self, key: str) -> Lock:
        """Any other exclusion, e.g. one patrol per being (`patrol:<being id>`)."""
        ...


class Waker(Protocol):
    def notify(self) -> None: ...


Listen = Callable[[Waker, threading.Event], None]
"""Runs until the event is set, waking the worker (`Waker.notify`) when the log has new events."""


# -- what the services use of the application object (`bootstrap.Engram`) ------------------------


class _Logged(Protocol):
    """The log, the views and the time: what every service below uses."""

    @property
    def store(self) -> AggregateStore: ...

    @property
    def views(self) -> Views: ...

    @property
    def clock(self) -> Clock: ...


class Reads(_Logged, Protocol):
    """What the reads (services/reading.py) use."""

    @property
    def settings(self) -> Settings: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def runner(self) -> CommandRunner: ...


class Patrols(_Logged, Protocol):
    """What a patrol (services/patrol/run.py) uses."""

    @property
    def settings(self) -> Settings: ...

    @property
    def ids(self) -> IdFactory: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def llm(self) -> LLM: ...


class Tokens(_Logged, Protocol):
    """What the API tokens (services/tokens.py) use."""

    @property
    def ids(self) -> IdFactory: ...

    @property
    def runner(self) -> CommandRunner: ...


class AutoPatrols(Protocol):
    """What the worker's automatic patrols (services/patrol/auto.py) use."""

    @property
    def settings(self) -> Settings: ...

    @property
    def views(self) -> Views: ...

    @property
    def clock(self) -> Clock: ...

    def patrol(self, being: str, *, dry_run: bool = False, llm: LLM | None = None) -> PatrolReport: ...


class JournalFiles(Protocol):
    """Where the journals are written (ADR 0054): a folder per being under one root.

    `folder` and `name` are single path components (never `..` nor a separator). A write is atomic:
    a reader sees the old file or the new one, never a part of it."""

    def location(self, folder: str) -> str:
        """The folder's path, for messages."""
        ...

    def write(self, folder: str, name: str, text: str) -> None: ...

    def remove(self, folder: str) -> int:
        """Delete the folder and its files (erasure); returns how many files went."""
        ...

    def read(self, folder: str, name: str) -> str | None:
        """The file's text, or None when there is none."""
        ...
