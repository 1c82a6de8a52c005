"""The key store port: the data keys that encrypt a being's personal text in the log (ADR 0073).

Keys live outside the log, so that destroying one makes every event it encrypted unreadable while
the log itself stays append-only ("crypto-shredding"). The default adapter is a 0600 file under the
data dir (`adapters/key_files.py`); a KMS can take its place behind the same protocol.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol, runtime_checkable
from uuid import UUID

from engram.services.errors import ServiceError


class KeyStoreError(ServiceError):
    """The key store cannot be used as it is (missing, wrong permissions, unreadable): refuse to start."""

    code = "key_store"


class KeyDestroyed(Exception):
    """The key was destroyed: what it encrypted is erased."""


@runtime_checkable
class KeyStore(Protocol):
    """Data keys by key id (a being's id; later a subject's or an item's)."""

    @property
    def exists(self) -> bool:
        """Whether the store was ever created (a missing store over a log with sealed events: refuse)."""

    @property
    def location(self) -> str:
        """Where it is, for messages."""

    def key_for_writing(self, key_id: UUID) -> bytes | None:
        """A being's key to encrypt with, created on first use; None if it was destroyed (nothing
        may be written under it again)."""

    def slot_for_writing(
        self, key_id: UUID, *, being_id: UUID, subject: str | None, item_id: UUID | None
    ) -> tuple[UUID, bytes] | None:
        """An item's or a subject's key (ADR 0075): (the slot the sealed header names, the key), taken
        from a pool created ahead and tagged with its being, subject and the item whose forgetting
        destroys it; None if the key or its being was destroyed."""

    def key_of_slot(self, slot: UUID, key_id: UUID, being_id: UUID) -> bytes:
        """The key in a slot, to decrypt with. Raises `KeyDestroyed` if key id or being was destroyed,
        `KeyStoreError` if the store never held the slot."""

    def key_for_reading(self, key_id: UUID) -> bytes:
        """The key to decrypt with. Raises `KeyDestroyed` if it was destroyed, `KeyStoreError` if the
        store never held it."""

    def create_keys(
        self, wanted: Sequence[tuple[UUID, UUID, str | None, UUID | None]], new: Collection[UUID] = ()
    ) -> list[tuple[UUID, bytes] | None]:
        """Take the item and subject keys of a save at once, each key id once as (key id, being,
        subject, item): at most one write to the disk for a batch (ADR 0075). `new`: key ids of
        aggregates the save creates (no key can exist for them: not looked up). Returns each key's
        (slot, key) in the order asked, None where the key or its being was destroyed."""

    def settle(self) -> None:
        """Wait until the keys this thread's last `create_keys` took are on disk (the mapper asks once
        the save's events are encrypted, before they are written); raises if they could not be."""

    def untagged_slots(self, being_id: UUID) -> list[UUID]:
        """The being's slots without tags: reserved and unused, or used with tags a power cut lost."""

    def tag_slot(self, slot: UUID, key_id: UUID, subject: str | None, item_id: UUID | None) -> None:
        """Write back the tags of a slot, recovered from an event it sealed."""

    def destroy(self, key_id: UUID) -> bool:
        """Destroy the key (a tombstone stays, saying it was destroyed); False if it already was."""

    def destroy_many(self, key_ids: list[UUID]) -> int:
        """Destroy several keys; returns how many were live."""

    def owned_keys(
        self, being_id: UUID, *, subject: str | None = None, item_id: UUID | None = None
    ) -> list[UUID]:
        """The live item and subject keys tagged with the being (and the subject, or the item)."""

    def is_destroyed(self, key_id: UUID) -> bool:
        """Cheap enough to ask per event: an adapter may answer from a copy at most a moment old."""

    def destroyed_version(self) -> int:
        """A number that changes whenever a key is destroyed (here, or in another process as soon as
        `is_destroyed` would see it): a reader may keep trusting the ciphers it checked at the same
        number instead of asking `is_destroyed` per event."""

    def create(self) -> None:
        """Create the empty store if there is none."""

    def export_keys(self, key_id: UUID) -> Mapping[str, str]:
        """The live keys of being `key_id` (its own and its items' and subjects') as {key id hex:
        value}, for an export `--with-keys`."""

    def import_keys(self, keys: Mapping[str, str]) -> int:
        """Add keys exported by `export_keys`; returns how many were new. A destroyed key stays destroyed."""

    def import_tombstones(self, key_ids: Collection[UUID]) -> int:
        """Record as destroyed the item and subject keys an export says were destroyed where it was
        written, so that their events read as erased here too; a key this store holds is left as it
        is (a copy kept here is forgotten here, with `forget`). Returns how many were recorded."""


@runtime_checkable
class ShreddableLog(Protocol):
    """What erasure asks of the log's storage beyond the key store (adapters/eventstore/shredding.py)."""

    def sealed_events(self, key_id: UUID) -> int:
        """How many stored events are sealed under `key_id` (read from their clear header)."""

    def recover_tags(self, being_id: UUID) -> int:
        """Tag again the being's item keys whose tags a power cut lost, from the events they sealed
        (ADR 0075); asked before forgetting a subject or an item. Returns how many."""

    def clear_events(self, key_id: UUID) -> int:
        """How many stored events in clear (written before ADR 0073) name `key_id`: these no key can shred."""

    def sealed_under(self, key_ids: set[UUID]) -> int:
        """How many stored events are sealed under any of `key_ids` (ADR 0075)."""

    def keys_of(self, originator_id: UUID) -> set[UUID | None]:
        """The keys an aggregate's stored events are sealed under (None: an event in clear)."""

    def drop_sealed_snapshots(self, key_id: UUID) -> int:
        """Delete the snapshots sealed under `key_id` (a cache); returns how many."""

    def forget_cipher(self, key_id: UUID) -> None:
        """This process stops decrypting with the destroyed key at once."""

    def scrub(self) -> list[str]:
        """Make deleted rows unrecoverable from the files this deployment writes (SQLite: checkpoint
        the WAL and VACUUM); returns what was scrubbed."""
