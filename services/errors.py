"""Application errors, on top of the domain's. Interfaces map each `code` to an exit code or HTTP status."""

from __future__ import annotations

from typing import Any

from engram.domain.errors import DomainError


class EmbedderError(Exception):
    """The embedder could not produce vectors (network, quota, bad model): the `Embedder` port's error."""


class ServiceError(DomainError):
    code = "service_error"


class NotFound(ServiceError):
    """Unknown id or name — also what another being's resources look like."""

    code = "not_found"


class Conflict(ServiceError):
    code = "conflict"


class DuplicateBeing(Conflict):
    code = "duplicate_being"


class IdempotencyConflict(Conflict):
    """The idempotency key was used before with different content."""

    code = "idempotency_conflict"


class ConcurrencyConflict(Conflict):
    """Optimistic concurrency failed after the bounded retries."""

    code = "concurrency_conflict"


class WriteRaced(Exception):
    """Internal signal: another writer got there first; the command is retried."""

    def __init__(self, detail: Any = None) -> None:
        super().__init__("a concurrent write raced this one")
        self.detail = detail


class ConsistencyTimeout(ServiceError):
    """The views did not reach the requested log position in time (is the worker running?)."""

    code = "consistency_timeout"


class StorageFull(ServiceError):
    """The disk (or the database) a write needed is full; nothing was written (ADR 0030).

    `path` names what is full: a file or directory of the data dir, or a PostgreSQL database. The
    same command succeeds once space is freed; the worker waits and resumes by itself.
    """

    code = "storage_full"

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(
            f"no space left for {path}{f' ({detail})' if detail else ''}: nothing was written; "
            "free some space and try again",
            path=path,
        )
        self.path = path
        self.detail = detail

    def __reduce__(self) -> tuple[type[StorageFull], tuple[str, str]]:
        # Raised in the embedded vector index's owner, it reaches the caller pickled (ADR 0036).
        return (StorageFull, (self.path, self.detail))
