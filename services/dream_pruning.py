"""Episodic pruning (spec 003 §3 step 5, issue #12, ADR 0066): a dreaming step that archives a
being's old, unimportant facts — never deletes them (erasure is another command).

A fact is pruned when it is the being's own (not a space's), active, not pinned, never restated
(`reinforcements == 0`), its importance on the 1–10 scale at most `prune_max_poignancy` (1: a fact
of importance 0) and untouched for `prune_after_days`. Memory nodes are left to patrol's decay (spec
000), notes to their time to live (ADR 0046), messages to the log: none of them is pruned twice.
At most `BATCH` facts a tick; a fact restated or pinned between the read and the write is left
alone, an archived one archives nothing, so a re-run writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import structlog

from engram.domain.fact import ArchiveReason, Fact
from engram.domain.importance import FACT_POIGNANCY
from engram.projections.fact_queries import VIEW as FACTS_VIEW
from engram.projections.facts import FACTS
from engram.projections.notes import utc_text
from engram.services.commands import Done
from engram.services.runner import CommandRunner
from engram.services.sleep import StepContext, StepResult
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.sleep.pruning")

BATCH = 50
"""Facts archived at most per tick: one transaction, bounded whatever the being holds."""


def max_fact_importance(max_poignancy: int) -> int:
    """The highest fact importance (0–3) whose poignancy (1–10) is at most `max_poignancy`; -1: none."""
    return max((i for i, p in enumerate(FACT_POIGNANCY) if p <= max_poignancy), default=-1)


class PruningStep:
    name = "pruning"
    phase = "dreaming"

    def __init__(
        self,
        store: AggregateStore,
        runner: CommandRunner,
        views: Callable[[], Any],
        after_days: float,
        max_poignancy: int,
    ) -> None:
        self.store = store
        self.runner = runner
        self._views = views
        self.after = timedelta(days=after_days)
        self.max_importance = max_fact_importance(max_poignancy)

    def candidates(self, being_id: UUID, before: str, limit: int = BATCH) -> list[Any]:
        if self.max_importance < 0:
            return []
        views = self._views()
        views.ensure(names=["facts"])
        return list(
            views.read._select(
                FACTS_VIEW,
                FACTS,
                "owner_id = ? AND owner_kind = 'being' AND status = 'active' AND NOT pinned "
                "AND reinforcements = 0 AND importance <= ? AND updated_at < ?",
                [str(being_id), self.max_importance, before],
                f"ORDER BY updated_at, id LIMIT {int(limit)}",
            )
        )

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        rows = self.candidates(being_id, utc_text(ctx.now - self.after))
        if not rows:
            return StepResult()
        seen = {UUID(r["id"]): int(r["version"]) for r in rows}

        def handle() -> Done:
            found = self.store.find_many(Fact, list(seen), being_id=being_id)
            # restated, pinned or archived since the read: left alone (the view may lag the log).
            due = [
                f
                for f in found.values()
                if f.active and not f.pinned and f.reinforcements == 0 and f.version == seen[f.id]
            ]
            for fact in due:
                fact.archive(ctx.now, ArchiveReason.PRUNING)
            position = self.store.save(*due) if due else None
            return Done(position=position, details={"archived": [str(f.id) for f in due]})

        done = self.runner.run("prune_facts", handle, being_id=being_id)
        archived = list(done.details["archived"])
        if archived:
            log.info("pruned", being_id=str(being_id), archived=len(archived))
        return StepResult(done=len(archived), remaining=len(rows) == BATCH, details={"archived": archived})

    def pending(self, being_id: UUID) -> int | None:
        return None  # depends on the clock of the tick; `engram mode` does not guess it
