"""Sleep's `consolidation` step (spec 003's compacting, issue #12, ADR 0061): what is still
unprocessed when a being falls asleep is processed, a bounded amount per tick, before it dreams.

Three kinds of work, each kept by its own process manager's aggregates (so a tick killed halfway
resumes where they stand, and nothing is done twice):
- unsorted scene notes: one patrol of the being (`engram.patrol`, with its own lock — a patrol
  already running means "next tick"), which turns every pending scene note into a node;
- messages not yet extracted: `FactExtraction.run_pending(being, limit=5)` (its `Extraction` record
  per message; without an LLM it records the skip once, per being);
- summaries due: `ConversationSummaries.run_due(being, limit=5)` conversations.

`remaining` holds the compacting phase while any of them has work left that this tick could move:
a summary refused by the LLM waits for its next trigger (ADR 0053) and does not hold the phase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import structlog

from engram.projections.notes import utc_text
from engram.services.sleep import StepContext, StepResult

log = structlog.get_logger("engram.sleep.consolidation")

PER_TICK = 5
"""Messages extracted and conversations summarised per tick (spec 003: batches of 5)."""


class ConsolidationStep:
    name = "consolidation"
    phase = "compacting"

    def __init__(
        self,
        views: Callable[[], Any],
        patrol: Callable[[str], Any],
        extraction: Callable[[], Any],
        summaries: Callable[[], Any],
        *,
        per_tick: int = PER_TICK,
    ) -> None:
        self._views = views
        self._patrol = patrol
        self._extraction = extraction
        self._summaries = summaries
        self.per_tick = per_tick

    # -- what is left ---------------------------------------------------------------------------

    def counts(self, being_id: UUID, now: str | None = None) -> dict[str, int]:
        """The being's unprocessed work: scene notes to sort, messages to extract, conversations
        with summaries due."""
        views = self._views()
        views.ensure(names=["notes", "extraction", "conversations"])
        notes = views.read.notes(being_id, kinds=["scene"], parse_status="pending", active_at=now)
        newest = views.extraction.newest_pending(being_id)
        return {
            "notes": len(notes),
            "messages": int(newest.get(str(being_id), (0, 0))[1]),
            "summaries": len(views.conversations.due(being_id, limit=1000)),
        }

    def pending(self, being_id: UUID) -> int | None:
        return sum(self.counts(being_id).values())

    # -- a tick ---------------------------------------------------------------------------------

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        before = self.counts(being_id, utc_text(ctx.now))
        details: dict[str, Any] = {"before": before}
        done = 0
        busy = False  # a part that could not run this tick (a patrol already running, an error)
        being = str(being_id)
        if before["notes"] and not ctx.stopping():
            from engram.services.patrol.run import PatrolAlreadyRunning

            try:
                report = self._patrol(being)
                created = sum(
                    int(s["counts"].get("nodes_created", 0))
                    for s in report.steps
                    if isinstance(s.get("counts"), dict)
                )
                details["nodes_created"] = created
                done += before["notes"]
            except PatrolAlreadyRunning:
                details["patrol"] = "already running; next tick"
                busy = True
        extracted = 0
        if before["messages"] and not ctx.stopping():
            report = self._extraction().run_pending(being, limit=self.per_tick)
            extracted = report.messages + report.failed + report.already
            details["extraction"] = {
                "messages": report.messages,
                "stated": report.stated,
                "failed": report.failed,
                "skipped": report.skipped,
            }
            done += report.messages
        written = 0
        if before["summaries"] and not ctx.stopping():
            s = self._summaries().run_due(being, limit=self.per_tick)
            written = s.sessions + s.rolling + s.spines
            details["summaries"] = {"written": written, "rejected": s.rejected, "deferred": s.deferred}
            done += written
        after = self.counts(being_id, utc_text(ctx.now))
        details["after"] = after
        remaining = (
            busy
            or after["notes"] > 0
            or (after["messages"] > 0 and extracted > 0)
            or (after["summaries"] > 0 and written > 0)
        )
        return StepResult(done=done, remaining=remaining, details=details)
