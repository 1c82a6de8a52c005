"""The expiry sweep: records `Note.Expired` for every note whose `expires_at` has passed (ADR 0048).

Reads never wait for it (they compare `expires_at` with their own now); the sweep makes the state
an event, so that auditors and a rebuild see when Engram saw the note expire. The clock is read once
per sweep and is the events' timestamp; replay never reads it.

The notes due are found through the notes view's partial index `notes_due` (its cost follows the
notes due, not the notes stored), a bounded batch at a time, one transaction per batch. Two workers
(or a worker and `engram notes sweep`) may sweep at once: a batch that raced another is read again
and the notes already recorded are skipped, so neither sweep fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import structlog

from engram.domain.note import Note
from engram.projections.notes import utc_text
from engram.projections.queries import ReadModels
from engram.services.errors import ConcurrencyConflict, NotFound
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.notes.expiry")

SWEEP_BATCH = 500
"""Notes per transaction: a few hundred events commit in milliseconds and hold no lock for long."""


@dataclass(frozen=True)
class SweepReport:
    expired: int
    """Notes this sweep recorded as expired."""
    skipped: int
    """Notes due that another sweep recorded first (or that no longer were to be recorded)."""
    batches: int
    at: str
    """The clock reading of this sweep (the events' timestamp), ISO 8601."""

    def as_dict(self) -> dict[str, object]:
        return {"expired": self.expired, "skipped": self.skipped, "batches": self.batches, "at": self.at}


class NoteExpirySweep:
    """`Engram.note_expiry`: run `sweep()` periodically (the worker) or once (`engram notes sweep`)."""

    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        read: Callable[[], ReadModels],
        *,
        batch_size: int = SWEEP_BATCH,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self._read = read
        self.batch_size = batch_size

    def sweep(self, *, stopping: Callable[[], bool] = lambda: False) -> SweepReport:
        at = self.clock.now()
        now = utc_text(at)
        read = self._read()
        expired = skipped = batches = 0
        after: tuple[str, str] | None = None
        while not stopping():
            rows = read.notes_due(now, after=after, limit=self.batch_size)
            if not rows:
                break
            after = (rows[-1]["expires_at"], rows[-1]["id"])
            ids = [UUID(r["id"]) for r in rows]
            done = self._expire(ids, at)
            batches += 1
            expired += done
            skipped += len(ids) - done
            if len(rows) < self.batch_size:
                break
        report = SweepReport(expired, skipped, batches, at.isoformat())
        if expired or skipped:
            log.info("notes expired", **report.as_dict())
        return report

    def _expire(self, ids: list[UUID], at: datetime) -> int:
        """Record the batch's expiries in one transaction; the count recorded by this sweep."""

        def handle() -> int:
            try:
                notes = self.store.get_many(Note, ids)
            except NotFound:  # the view knows a note the log does not: not this sweep's to fix
                notes = [n for n in (self.store.find(Note, i) for i in ids) if n is not None]
            due = [n for n in notes if not n.expired]
            for note in due:
                note.expire(at)
            if due:
                self.store.save(*due)
            return len(due)

        try:
            return self.runner.run("expire_notes", handle)
        except ConcurrencyConflict:  # other sweeps kept winning this batch: they recorded it
            log.warning("expiry batch lost every race; left to the other sweep", notes=len(ids))
            return 0
