"""The event log as the aggregate store uses it (the `services.ports.EventStore` port): aggregates
loaded in batches, saves that may skip the wait for the disk, and every read `EventLogSource` has."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Recording, StoredEvent

from engram.adapters.eventstore import batch_reads
from engram.adapters.eventstore.log_reader import EventLogSource
from engram.adapters.eventstore.recorders import DURABLE


class LogAccess(EventLogSource):
    @property
    def batch_reads(self) -> bool:
        """Whether aggregates load in batches (two queries for many); else one by one."""
        return batch_reads.supports(self.app.recorder)

    def latest_snapshots(self, ids: Sequence[UUID]) -> dict[UUID, StoredEvent]:
        """The latest snapshot of each of `ids` that has one (none without a snapshot store)."""
        snapshots = self.app.snapshots
        if not ids or snapshots is None or not batch_reads.supports(snapshots.recorder):
            return {}
        return batch_reads.latest_records(snapshots.recorder, ids)

    def records_after(self, after: Mapping[UUID, int]) -> dict[UUID, list[StoredEvent]]:
        """Each aggregate's stored events after the version given, in order."""
        return batch_reads.records_after(self.app.recorder, after)

    def save(self, aggregates: Sequence[Aggregate], *, durable: bool) -> list[Recording[UUID]]:
        """`durable=False`: the commit does not wait for the disk (ADR 0018)."""
        return self.app.save(*aggregates, **({} if durable else {DURABLE: False}))
