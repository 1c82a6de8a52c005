"""Running a read's heaviest SQL statements on a worker thread while the caller does other work (ADR 0017).

`query` spends most of its time in two waits that need no Python: the full-text statement in the
database (SQLite and psycopg release the GIL while a statement runs) and the vector search. Run one
after the other they add up; here the statements run on a worker while the calling thread searches
the vectors.

The caller's own connection and read transaction go to the worker, so every statement still sees
the caller's snapshot; the caller does not use that connection until the worker is done (`run`
waits for it even when the caller's work fails). The number of workers is bounded: when all are
busy the statements run on the calling thread, as they would without this.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

R = TypeVar("R")
T = TypeVar("T")

DEFAULT_WORKERS = 4
"""Statements in flight at once, over all threads of a process; more callers run theirs inline."""


class Overlap:
    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self.workers = workers
        self._slots = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self.overlapped = 0  # calls whose statements ran on a worker
        self.inline = 0  # calls that found every worker busy

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():  # a forked child has no workers
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="engram-read")
                self._pid = os.getpid()
            return self._executor

    def run(self, jobs: Sequence[Callable[[], R]], alongside: Callable[[], T]) -> tuple[list[R], T]:
        """Each of `jobs` in turn on a worker while `alongside` runs on the calling thread; both results.

        The worker is running the first job before `alongside` starts: work that holds the GIL
        (the vector engine does) then cannot keep the worker from reaching its statement."""
        if not jobs:
            return [], alongside()
        if not self._slots.acquire(blocking=False):
            with self._lock:
                self.inline += 1
            results = [job() for job in jobs]
            return results, alongside()
        try:
            started = threading.Event()

            def work() -> list[R]:
                started.set()
                return [job() for job in jobs]

            future = self._pool().submit(work)
            started.wait()
            with self._lock:
                self.overlapped += 1
            try:
                other = alongside()
            finally:
                results = future.result()  # the jobs' connection is the caller's: wait for it always
            return results, other
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            if self._executor is not None and self._pid == os.getpid():
                self._executor.shutdown(wait=True)
            self._executor = None
