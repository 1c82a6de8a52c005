"""Erasure that holds (crypto-shredding, ADR 0073/0074): `forget being`.

Destroying a being's key makes every event sealed under it unreadable, in the log and in every
copy of it, without rewriting the log. What was derived from those events (views, full-text rows,
vectors, journals, snapshots, caches) is purged here, and an `Erased` receipt is appended: what, when,
by whom, how much — never the content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal
from uuid import UUID

import structlog
from pydantic import BaseModel, Field

from engram.domain.erasure import Erasure, being_erasure_id
from engram.domain.ids import being_id_for_name
from engram.services.beings import parse_uuid, resolve_being
from engram.services.erasure_purge import ViewPurge
from engram.services.errors import Conflict
from engram.services.journal_markdown import journal_folder
from engram.services.key_store import KeyStore, ShreddableLog
from engram.services.ports import Clock, JournalFiles
from engram.services.store import AggregateStore

if TYPE_CHECKING:
    from engram.services.views import Views

log = structlog.get_logger(__name__)


def unreadable(events: int) -> str:
    """What a forget tells of the events it erased, in words."""
    return f"{events} event{'' if events == 1 else 's'} can no longer be read"


class Forgotten(BaseModel):
    """What `forget` did."""

    scope: Literal["being", "subject", "note", "message", "fact"]
    being_id: UUID
    already: bool = Field(description="It had been forgotten before: nothing was done again.")
    erasure_id: UUID | None = None
    position: int | None = Field(default=None, description="The receipt's position in the log.")
    counts: dict[str, int] = Field(default_factory=dict)
    message: str


class Forgetting:
    def __init__(
        self,
        store: AggregateStore,
        keys: KeyStore,
        storage: ShreddableLog,
        views: Callable[[], Views],
        journals: JournalFiles,
        clock: Clock,
        purge: ViewPurge | None = None,
    ) -> None:
        """`purge`: deletes the being's rows from the views (ADR 0077); without it every view is
        rebuilt instead (ADR 0073's way, which `engram bench erasure` measures beside it)."""
        self.store = store
        self.purge = purge
        self.keys = keys
        self.storage = storage
        self.views = views
        self.journals = journals
        self.clock = clock

    def _being_id(self, ref: str) -> UUID:
        as_id = parse_uuid(ref)
        return as_id if as_id is not None else being_id_for_name(ref)

    def forget_being(
        self, ref: str, *, by: str, progress: Callable[[str, int, int], None] | None = None
    ) -> Forgotten:
        being_id = self._being_id(ref)
        receipt_id = being_erasure_id(being_id)
        if self.keys.is_destroyed(being_id):
            if self.store.find(Erasure, receipt_id) is not None:
                return Forgotten(
                    scope="being",
                    being_id=being_id,
                    already=True,
                    message=f"being {ref!r} was already forgotten",
                )
            # The key went but the purge did not finish (a crash, a rebuild already running): finish it.
            owned = self.keys.owned_keys(being_id)
            self.keys.destroy_many(owned)  # an erasure cut short between the two destructions
            counts = {"events": self.storage.sealed_events(being_id), "journal_files": 0}
            if parse_uuid(ref) is None:
                counts["journal_files"] = self.journals.remove(journal_folder(ref, being_id))
            return self._purge(ref, being_id, receipt_id, counts, by, progress)
        being = resolve_being(self.store, ref)
        being_id = UUID(str(being.id))
        receipt_id = being_erasure_id(being_id)
        in_clear = self.storage.clear_events(being_id)
        if in_clear:
            # ADR 0074: no key can shred an event stored in clear; purging the views would not hold
            # either, as a rebuild reads them back. Refuse rather than report an erasure that is not one.
            raise Conflict(
                f"being {being.name!r} has {in_clear} events written before encryption (in clear): "
                "they cannot be shredded, so nothing was erased (`engram keys seal` makes them erasable)"
            )
        # Its items' and subjects' keys too (ADR 0075): their events count with the being's.
        owned = self.keys.owned_keys(being_id)
        counts = {"events": self.storage.sealed_under({being_id, *owned})}
        # The journals first: their folder is named after the being, unreadable once the key is gone
        # (and a journal removed by an erasure that then fails is only rewritten by the next refresh).
        counts["journal_files"] = self.journals.remove(journal_folder(being.name, being_id))
        self.keys.destroy_many(owned)
        self.keys.destroy(being_id)
        return self._purge(ref, being_id, receipt_id, counts, by, progress)

    def _purge(
        self,
        ref: str,
        being_id: UUID,
        receipt_id: UUID,
        counts: dict[str, int],
        by: str,
        progress: Callable[[str, int, int], None] | None,
    ) -> Forgotten:
        self.storage.forget_cipher(being_id)
        self.store.cache.clear()
        self.store.known_beings.clear()
        counts["snapshots"] = self.storage.drop_sealed_snapshots(being_id)
        if self.purge is not None:
            # The being's rows, full-text table and vectors deleted from each view (ADR 0077): what
            # a rebuild would leave out, as its events now read as erased.
            purged = self.purge.purge_being(being_id, progress=progress)
            counts["view_rows"] = purged.row_count
            counts["vector_points"] = purged.point_count
            counts["views_rebuilt"] = len(purged.rebuilt)
            counts["tables_rewritten"] = len(purged.scrubbed)
        else:
            # Every view rebuilt from the log: the being's events now read as erased and no
            # projection handles those, so its rows are not in the new generations.
            counts["views_rebuilt"] = len(self.views().rebuild_all(progress=progress))
        receipt = Erasure.record(receipt_id, being_id, "being", str(being_id), by, counts, self.clock.now())
        position = self.store.save(receipt)
        counts["files_scrubbed"] = len(self.storage.scrub())
        log.info("being forgotten", being_id=str(being_id), by=by, **counts)
        return Forgotten(
            scope="being",
            being_id=being_id,
            already=False,
            erasure_id=receipt.id,
            position=position,
            counts=counts,
            message=f"being {ref!r} forgotten: {unreadable(counts['events'])}",
        )
