"""Runs one command: bounded optimistic-concurrency retries, timing and a structured log line.

A command handler is a function that loads the aggregates it needs, mutates
them, and saves them with one `AggregateStore.save` call (one transaction).
If another writer raced it (the library's `IntegrityError`), the whole
function runs again on fresh state, up to `attempts` times, after a short random
wait that doubles with each attempt: writers that raced each other and retried at
once would race again (eight reads reactivating the same nodes did, issue #7).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import structlog

from engram.domain.errors import DomainError
from engram.services.errors import ConcurrencyConflict, WriteRaced

T = TypeVar("T")

log = structlog.get_logger("engram.command")


@contextmanager
def correlation(correlation_id: str | None = None, **bound: str) -> Iterator[str]:
    """Bind a correlation id (and e.g. the being) to every log line inside the block."""
    cid = correlation_id or structlog.contextvars.get_contextvars().get("correlation_id") or uuid.uuid4().hex
    tokens = structlog.contextvars.bind_contextvars(correlation_id=cid, **bound)
    try:
        yield cid
    finally:
        structlog.contextvars.reset_contextvars(**tokens)


RETRY_WAIT_S = 0.004
"""The longest wait before the first retry; it doubles with each attempt, up to `MAX_RETRY_WAIT_S`."""
MAX_RETRY_WAIT_S = 0.1


class CommandRunner:
    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        # Jitter only: when a retry runs never reaches an event.
        self._jitter = random.Random()

    def run(self, command: str, handler: Callable[[], T], *, being_id: object = None) -> T:
        started = time.perf_counter()
        bound = {"command": command}
        if being_id is not None:
            bound["being_id"] = str(being_id)
        with correlation(**bound):
            for attempt in range(1, self.attempts + 1):
                try:
                    result = handler()
                except WriteRaced:
                    log.debug("command raced, retrying", attempt=attempt)
                    if attempt < self.attempts:
                        time.sleep(
                            self._jitter.uniform(0, min(RETRY_WAIT_S * 2 ** (attempt - 1), MAX_RETRY_WAIT_S))
                        )
                    continue
                except DomainError as exc:
                    log.info(
                        "command refused",
                        error=exc.code,
                        reason=exc.message,
                        duration_ms=round((time.perf_counter() - started) * 1000, 3),
                    )
                    raise
                log.info(
                    "command handled",
                    attempts=attempt,
                    duration_ms=round((time.perf_counter() - started) * 1000, 3),
                )
                return result
            log.warning("command conflicted", attempts=self.attempts)
            raise ConcurrencyConflict(
                f"{command} lost {self.attempts} optimistic-concurrency races in a row; try again",
                attempts=self.attempts,
            )
