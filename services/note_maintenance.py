"""The worker's maintenance merge (spec 002, ADR 0048): volatile notes without `ttl_days` that happened
more than 7 days ago are merged in batches of 5 of the same being, scope and kind (and sensitivity,
so that one sensitive note does not hide four others inside a sensitive summary).

This version's intake never writes such a note (a volatile note needs `ttl_days`, ADR 0046): they
come from logs written before that rule, or from events written by other tools. A group's last batch
of 2 to 4 notes is merged too; a lone note waits for company. The summary is stable, so it is never
merged again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import groupby
from typing import Any
from uuid import UUID

import structlog

from engram.domain.errors import DomainError
from engram.domain.note import Note, Stability
from engram.projections.notes import utc_text
from engram.projections.queries import ReadModels
from engram.services.note_lifecycle import NoteLifecycle, NotesMerged
from engram.services.ports import Clock
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.notes.maintenance")

MAINTENANCE_AGE = timedelta(days=7)
MAINTENANCE_BATCH = 5
MAX_CANDIDATES = 5000
"""Notes one run looks at; the next run takes the rest."""


@dataclass
class MaintenanceReport:
    merged: list[NotesMerged] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "merges": len(self.merged),
            "notes_merged": sum(len(m.sources) for m in self.merged),
            "summaries": [m.note_id for m in self.merged],
            "failed": self.failed,
        }


class NoteMaintenance:
    """`Engram.note_maintenance`: run `run()` periodically (the worker) or once (`engram notes maintain`)."""

    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        lifecycle: NoteLifecycle,
        read: Callable[[], ReadModels],
        *,
        resolve: Callable[[str], UUID],
    ) -> None:
        self.store = store
        self.clock = clock
        self.lifecycle = lifecycle
        self._read = read
        self._resolve = resolve

    def batches(self, being_ref: str | None = None) -> list[list[UUID]]:
        """The merges due: ids of up to 5 notes of one being, scope, kind and sensitivity, oldest first."""
        before = utc_text(self.clock.now() - MAINTENANCE_AGE)
        being_id = self._resolve(being_ref) if being_ref is not None else None
        rows = self._read().volatile_without_ttl(before, being_id=being_id, limit=MAX_CANDIDATES)
        out: list[list[UUID]] = []
        for _, group in groupby(rows, key=lambda r: (r["being_id"], r["scope"], r["kind"], r["sensitivity"])):
            ids = [UUID(r["id"]) for r in group]
            for i in range(0, len(ids), MAINTENANCE_BATCH):
                chunk = ids[i : i + MAINTENANCE_BATCH]
                if len(chunk) >= 2:
                    out.append(chunk)
        return out

    def run(
        self, being_ref: str | None = None, *, stopping: Callable[[], bool] = lambda: False
    ) -> MaintenanceReport:
        """Merge what is due (of one being with `being_ref`). The LLM writes the summary when one is
        configured, else the concatenation. A batch that can no longer be merged (a note superseded
        since the view was read) is reported and left; the others go on."""
        report = MaintenanceReport()
        for ids in self.batches(being_ref):
            if stopping():
                break
            try:
                sources = self.store.get_many(Note, ids)
                # The view may lag: what the log says now decides.
                if any(n.stability != Stability.VOLATILE or n.ttl_days is not None for n in sources):
                    continue
                Note.check_merge(sources)
                report.merged.append(self.lifecycle.merge_notes(sources))
            except DomainError as exc:
                report.failed.append(
                    {"notes": [str(i) for i in ids], "error": exc.code, "reason": exc.message}
                )
        if report.merged or report.failed:
            log.info("maintenance merged notes", **report.as_dict())
        return report
