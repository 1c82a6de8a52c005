"""`engram keys seal` (ADR 0095): make a log written before encryption (ADR 0074) or before item keys
(ADR 0075) erasable, by rewriting its old events into the form a new write gives them.

The rewrite itself (batches, the hash chain computed again, the progress row) is the `Resealer`'s
(`adapters/eventstore/resealing.py`); here: which beings, the dry run, the receipt (`KeySealing`:
the range, the counts, the chain's head before and after, who and when; never content), then the
scrub of the files, and the process's caches dropped (an aggregate cached before reads the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

import structlog
from pydantic import BaseModel, Field

from engram.domain.key_sealing import KeySealing, sealing_receipt_id
from engram.services.beings import resolve_being
from engram.services.ports import Clock
from engram.services.store import AggregateStore

log = structlog.get_logger(__name__)


class Resealer(Protocol):
    """The stored log's side of `keys seal` (`adapters/eventstore/resealing.py::LogResealing`)."""

    def survey(self, beings: set[UUID] | None, progress: Callable[[int], None] | None = None) -> Any:
        """What a run would rewrite (`SealCounts`), nothing written."""

    def reseal(
        self, scope: str, beings: set[UUID] | None, progress: Callable[[int, int], None] | None = None
    ) -> Any:
        """Rewrite, batch by batch; returns this run's `SealCounts`."""

    def pending(self) -> Any:
        """The progress row of a run not closed by its receipt (`Pending`), or None."""

    def head(self) -> tuple[int, str]:
        """The chain's head: (position, hash hex)."""

    def close(self) -> None:
        """Drop the progress row (the receipt is saved)."""

    def scrub(self) -> tuple[list[str], bool]:
        """Rewrite the files so the old bytes are gone (SQLite VACUUM, PostgreSQL VACUUM FULL):
        what was scrubbed, and whether that was every file."""

    def hashes_before_seals(self, position: int) -> list[tuple[str, str]]:
        """(receipt id, hash hex) of the chain at `position` before each seal that rewrote it."""


class Sealed(BaseModel):
    """What `keys seal` did (or, with `dry_run`, would do)."""

    scope: str = Field(description="The being's id, or `all`.")
    dry_run: bool
    nothing_to_seal: bool
    counts: dict[str, int] = Field(default_factory=dict)
    first_position: int | None = None
    last_position: int | None = None
    old_head_position: int | None = None
    old_head_hash: str | None = None
    new_head_hash: str | None = None
    receipt_id: UUID | None = None
    position: int | None = Field(default=None, description="The receipt's position in the log.")
    files_scrubbed: list[str] = Field(default_factory=list)
    message: str


class KeySealingService:
    def __init__(self, store: AggregateStore, resealer: Resealer, clock: Clock) -> None:
        self.store = store
        self.resealer = resealer
        self.clock = clock

    def _scope(self, being_ref: str | None) -> tuple[str, set[UUID] | None, str]:
        if being_ref is None:
            return "all", None, "the log"
        being = resolve_being(self.store, being_ref)
        being_id = UUID(str(being.id))
        return str(being_id), {being_id}, f"being {being.name!r}"

    def seal(
        self,
        being_ref: str | None,
        *,
        by: str,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Sealed:
        scope, beings, label = self._scope(being_ref)
        if dry_run:
            counts = self.resealer.survey(beings, (lambda p: progress(p, 0)) if progress else None)
            nothing = counts.events == 0 and counts.snapshots_dropped == 0
            return Sealed(
                scope=scope,
                dry_run=True,
                nothing_to_seal=nothing,
                counts=self._counts(counts),
                first_position=counts.first_position,
                last_position=counts.last_position,
                message=f"{label}: nothing to seal"
                if nothing
                else f"{label}: {counts.events} events would be sealed "
                f"({counts.in_clear} in clear, {counts.from_being_key} under the being's key)",
            )
        done = self.resealer.reseal(scope, beings, progress)
        pending = self.resealer.pending()
        if pending is None:  # nothing rewritten now nor by a run killed before
            if done.snapshots_dropped:
                self.store.cache.clear()
            return Sealed(
                scope=scope,
                dry_run=False,
                nothing_to_seal=True,
                counts=self._counts(done),
                message=f"{label}: nothing to seal",
            )
        counts = {**pending.counts, "snapshots_dropped": pending.counts.get("snapshots_dropped", 0)}
        counts["snapshots_dropped"] += done.snapshots_dropped
        counts["events"] = counts["in_clear"] + counts["from_being_key"]
        new_head = self.resealer.head()
        receipt_id = sealing_receipt_id(pending.old_head_position, pending.old_head_hash)
        position: int | None = None
        if self.store.find(KeySealing, receipt_id) is None:  # a run killed after its receipt: not twice
            receipt = KeySealing.record(
                receipt_id,
                scope=pending.scope,
                first_position=pending.first_position,
                last_position=pending.last_position,
                old_head_position=pending.old_head_position,
                old_head_hash=pending.old_head_hash,
                new_head_hash=new_head[1],
                by=by,
                counts=counts,
                at=self.clock.now(),
            )
            position = self.store.save(receipt)
        self.store.cache.clear()  # aggregates read the same; their snapshots may have gone
        files, complete = self.resealer.scrub()
        if complete:  # else the progress row stays: the next run finds the receipt and scrubs again
            self.resealer.close()
        log.info("keys sealed", scope=pending.scope, by=by, **counts)
        return Sealed(
            scope=pending.scope,
            dry_run=False,
            nothing_to_seal=False,
            counts=counts,
            first_position=pending.first_position,
            last_position=pending.last_position,
            old_head_position=pending.old_head_position,
            old_head_hash=pending.old_head_hash,
            new_head_hash=new_head[1],
            receipt_id=receipt_id,
            position=position,
            files_scrubbed=files,
            message=f"{label}: {counts['events']} events sealed ({counts['in_clear']} in clear, "
            f"{counts['from_being_key']} under the being's key), positions {pending.first_position}"
            f"–{pending.last_position}; the chain was hashed again from {pending.first_position}"
            + (
                ""
                if complete
                else "; some files could not be scrubbed (held by another process): run it again"
            ),
        )

    def checkpoint_before_seal(self, position: int, hash_hex: str) -> dict[str, Any] | None:
        """An auditor's checkpoint that no longer matches: was its position rewritten by a seal, and
        did it match the chain as it was before (ADR 0095)? None: no seal rewrote that position."""
        before = self.resealer.hashes_before_seals(position)
        if not before:
            return None
        for receipt_id, old in before:
            if old == hash_hex:
                receipt = self.store.find(KeySealing, UUID(receipt_id))
                return {"matched_before_seal": True, **self._receipt(receipt_id, receipt)}
        receipt_id = before[-1][0]
        return {
            "matched_before_seal": False,
            **self._receipt(receipt_id, self.store.find(KeySealing, UUID(receipt_id))),
        }

    @staticmethod
    def _receipt(receipt_id: str, receipt: KeySealing | None) -> dict[str, Any]:
        if receipt is None:  # a seal under way, or killed before its receipt
            return {"receipt_id": receipt_id, "sealed_by": None, "sealed_at": None}
        return {
            "receipt_id": receipt_id,
            "sealed_by": receipt.by,
            "sealed_at": receipt.created_on.isoformat(timespec="seconds"),
            "scope": receipt.scope,
            "first_position": receipt.first_position,
            "last_position": receipt.last_position,
            "old_head_position": receipt.old_head_position,
            "old_head_hash": receipt.old_head_hash,
        }

    @staticmethod
    def _counts(counts: Any) -> dict[str, int]:
        return {
            "events": counts.events,
            "in_clear": counts.in_clear,
            "from_being_key": counts.from_being_key,
            "snapshots_dropped": counts.snapshots_dropped,
        }
