"""Long admin work started from the explorer's admin page — a view's rebuild, the hash chain's
verify — run in a background thread of the server, their progress kept in memory for the page that
polls it (ADR 0087).

Each job's work is the same call the HTTP API and the CLI make (`views.rebuild`, `chain_check.verify`);
this module only runs it off the request and remembers how far it got. A server restart forgets the
jobs (a rebuild then restarts from the log, as any interrupted rebuild does).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

log = structlog.get_logger("engram.ui")

KEPT = 50
"""Finished jobs the page still lists; older ones are forgotten."""


@dataclass
class Job:
    id: str
    kind: str
    target: str
    started_at: datetime
    done: int = 0
    total: int = 0
    state: str = "running"  # running, done, failed
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    finished_at: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.state != "running"

    @property
    def percent(self) -> int:
        if self.finished and self.state == "done":
            return 100
        return min(99, int(self.done * 100 / self.total)) if self.total > 0 else 0

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, max(total, done)


class Jobs:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, kind: str, target: str, work: Callable[[Job], dict[str, Any]]) -> Job:
        """Run `work(job)` in a thread; what it returns becomes the job's result, what it raises its error."""
        job = Job(id=uuid.uuid4().hex, kind=kind, target=target, started_at=datetime.now(UTC))
        with self._lock:
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.finished]
            for old in sorted(finished, key=lambda j: j.started_at)[: max(0, len(finished) - KEPT)]:
                del self._jobs[old.id]

        def run() -> None:
            try:
                job.result = work(job)
                job.state = "done"
            except Exception as exc:  # shown on the page: the job's whole point is to report
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                job.error, job.state = message, "failed"
                log.warning("ui job failed", kind=kind, target=target, error=message)
            finally:
                job.finished_at = datetime.now(UTC)

        threading.Thread(target=run, name=f"ui-{kind}-{target}", daemon=True).start()
        log.info("ui job started", kind=kind, target=target, job=job.id)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def recent(self, limit: int = 10) -> list[Job]:
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: j.started_at, reverse=True)[:limit]


_making = threading.Lock()


def jobs_of(state: Any) -> Jobs:
    """The server's one job list (on the app's state), made at first use."""
    with _making:
        found = getattr(state, "ui_jobs", None)
        if not isinstance(found, Jobs):
            found = state.ui_jobs = Jobs()
        return found
