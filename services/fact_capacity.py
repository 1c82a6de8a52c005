"""Archive by capacity (issue #11, ADR 0057): after a write, the latest 80 active facts of each
(owner, subject) stay active — 120 for lore lines — and older ones that are not pinned are archived
with `reason: capacity`, in a follow-up transaction of the write.

It reads the facts view (caught up to the write first), so it is race-tolerant rather than exact:
two writers may both archive the same fact (the second is a no-op: archiving an archived fact writes
nothing), and a fact restated between the read and the archive is left alone (it is the newest now).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

import structlog

from engram.domain.fact import LORE_SUBJECT, ArchiveReason, Fact
from engram.services.commands import Done
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

log = structlog.get_logger(__name__)

ACTIVE_FACTS_PER_SUBJECT = 80
ACTIVE_LORE_LINES = 120


def capacity_of(subject: str) -> int:
    return ACTIVE_LORE_LINES if subject == LORE_SUBJECT else ACTIVE_FACTS_PER_SUBJECT


class FactCapacity:
    """`views` gives the engine's `Views` (lazily: the composition root builds it on first use)."""

    def __init__(
        self, store: AggregateStore, clock: Clock, runner: CommandRunner, views: Callable[[], Any]
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self.views = views

    def enforce(self, owner_id: UUID, subjects: Iterable[str], position: int | None) -> int:
        """Archives what is over capacity for the owner's `subjects`; returns how many it archived."""
        views = self.views()
        views.ensure(position, names=["facts"])
        seen: dict[UUID, int] = {}  # fact id -> the version the view read
        for subject in sorted(set(subjects)):
            for row in views.facts.over_capacity(owner_id, subject, capacity_of(subject)):
                seen[UUID(row["id"])] = int(row["version"])
        if not seen:
            return 0
        over = list(seen)

        def handle() -> Done:
            at = self.clock.now()
            found = self.store.find_many(Fact, over, being_id=owner_id)
            # restated since the read (a newer version), pinned or already archived: left alone.
            changed = [f for f in found.values() if f.active and not f.pinned and f.version == seen[f.id]]
            for fact in changed:
                fact.archive(at, ArchiveReason.CAPACITY)
            position = self.store.save(*changed) if changed else None
            return Done(position=position, details={"archived": len(changed)})

        done = self.runner.run("archive_facts_by_capacity", handle, being_id=owner_id)
        archived = int(done.details["archived"])
        log.info("facts.capacity", owner=str(owner_id), archived=archived)
        return archived
