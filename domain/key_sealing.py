"""The receipt of `engram keys seal` (ADR 0095): a log's old events rewritten into the form a new
write gives them (sealed under the being's, the item's or the subject's key), so that they can be
erased.

The receipt names the being, the range of positions rewritten, the counts, the chain's head before
and after (the hash chain is over the stored bytes, ADR 0069: an auditor's older checkpoint is
answered from it), who and when: never content. Stored in clear (`stored_in_clear`), like an
erasure's receipt.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

SEALING_NAMESPACE = UUID("5b0c3f5e-9a57-4a55-8d1e-6f2b1a0c9e31")


def sealing_receipt_id(old_head_position: int, old_head_hash: str) -> UUID:
    """One receipt per run, named by the head it started from: a run killed after its receipt and
    run again finds the receipt instead of writing a second one."""
    return uuid5(SEALING_NAMESPACE, f"keys-seal:{old_head_position}:{old_head_hash}")


class KeySealing(Aggregate):
    """One run of `engram keys seal`, as a receipt."""

    TOPIC = "engram.KeySealing"

    class Event(Aggregate.Event):
        TOPIC = "engram.KeySealing.Event"
        stored_in_clear: ClassVar[bool] = True  # a receipt: no personal text, readable by any auditor

    class Sealed(Event, Aggregate.Created):
        TOPIC = "engram.KeySealing.Sealed"
        class_version = 1
        scope: str  # a being's id, or "all"
        first_position: int
        last_position: int
        old_head_position: int
        old_head_hash: str
        new_head_hash: str
        by: str
        counts: dict[str, int]

    def __init__(
        self,
        scope: str,
        first_position: int,
        last_position: int,
        old_head_position: int,
        old_head_hash: str,
        new_head_hash: str,
        by: str,
        counts: dict[str, int],
    ) -> None:
        self.scope = scope
        self.first_position = first_position
        self.last_position = last_position
        self.old_head_position = old_head_position
        self.old_head_hash = old_head_hash
        self.new_head_hash = new_head_hash
        self.by = by
        self.counts = dict(counts)

    @classmethod
    def record(
        cls,
        receipt_id: UUID,
        *,
        scope: str,
        first_position: int,
        last_position: int,
        old_head_position: int,
        old_head_hash: str,
        new_head_hash: str,
        by: str,
        counts: dict[str, int],
        at: datetime,
    ) -> KeySealing:
        return cls._create(
            cls.Sealed,
            id=receipt_id,
            scope=scope,
            first_position=first_position,
            last_position=last_position,
            old_head_position=old_head_position,
            old_head_hash=old_head_hash,
            new_head_hash=new_head_hash,
            by=by,
            counts=dict(counts),
            timestamp=at,
        )
