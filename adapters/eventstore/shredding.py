# ruff: noqa: S608  (table names from the library's recorders, values as parameters)
"""The mapper that encrypts what the log stores, with the key of the being each event belongs to
(crypto-shredding, ADR 0073).

An event's whole transcoded state is sealed with AES-256-GCM (`cryptography`), behind a clear
header naming the key:

    b"EGK1" | key id (16 bytes) | nonce (12 bytes) | ciphertext and tag              (a being's key)
    b"EGK2" | key id (16) | being id (16) | slot (16) | nonce (12) | ciphertext and tag

The key id is the being's id, or an item's or a subject's (`key_choice.py`, ADR 0075). An item's or
a subject's key is found by its slot in the owned-key pool (`adapters/owned_keys.py`): the slot was
flushed to disk before the event, its tags (key id, subject, item) may not have been; the being id
lets a forgotten being's events read as erased whatever became of their item keys.

The associated data binds the ciphertext to its place in the log (originator id, version, topic),
so sealed state cannot be moved to another event unnoticed. Events of no being (tokens, the
receipts of erasures) are stored as before, in clear; so are the events written before this mapper
(ADR 0074): the header tells the two apart. When the key is destroyed the event reads as an
`ErasedContent`: it existed, its content is gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, cast
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic

from engram.adapters.eventstore.key_choice import KeyChoice, choose_key
from engram.domain.erasure import ContentErased, ErasedContent
from engram.services.key_store import KeyDestroyed, KeyStore, KeyStoreError

MAGIC = b"EGK1"
MAGIC_ITEM = b"EGK2"
MAGICS = (MAGIC, MAGIC_ITEM)
_HEADER = len(MAGIC) + 16
_ITEM_HEADER = _HEADER + 32
_NONCE = 12
_MAX_CIPHERS = 4096
"""Ciphers kept per direction (one per item key now, ADR 0075): an `AESGCM` holds ~2.5 KB, so 50k of
them held ~125 MB, and an item's key is mostly used by one save (its first events) and read back
together with its neighbours in the log. At 4096: 10k notes taken in batches grew the process by
14 MB instead of 31, at the same speed (ADR 0094); one evicted is rebuilt in ~2 µs."""
_MAX_PLANNED = 50_000


def sealed(state: bytes) -> bool:
    return bytes(state[:4]) in MAGICS


def being_of(state: bytes) -> UUID | None:
    """The being an `EGK2` event belongs to (None for `EGK1`: its key id is the being's, or legacy)."""
    return UUID(bytes=bytes(state[_HEADER : _HEADER + 16])) if bytes(state[:4]) == MAGIC_ITEM else None


def slot_of(state: bytes) -> UUID | None:
    return UUID(bytes=bytes(state[_HEADER + 16 : _ITEM_HEADER])) if bytes(state[:4]) == MAGIC_ITEM else None


def key_id_of(state: bytes) -> UUID:
    return UUID(bytes=bytes(state[4:_HEADER]))


def header_for(key_id: UUID) -> bytes:
    """The first bytes of every `EGK1` event sealed under `key_id` (a being's key)."""
    return MAGIC + key_id.bytes


def _owner(event_state: dict[str, Any]) -> UUID | None:
    being = event_state.get("being_id")
    if being is None:
        inner = event_state.get("state")  # a snapshot: the aggregate's state
        if isinstance(inner, dict):
            being = inner.get("being_id")
    return being if isinstance(being, UUID) else None


def _aad(originator_id: Any, version: int, topic: str) -> bytes:
    oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
    # `int.to_bytes` is `UUID.bytes` without its Python property call (once per event sealed).
    return b"%s|%d|%s" % (oid.int.to_bytes(16, "big"), version, topic.encode())


def erased(originator_id: Any, version: int, topic: str, state: bytes) -> ErasedContent:
    oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
    # An `EGK2` header names the being beside the item's key: the erased event stays its being's
    # (`log --being`, `history`, `why` find it); an `EGK1` key id is the being's own.
    return ErasedContent(oid, version, being_of(state) or key_id_of(state), topic)


class ShreddingMapper(Mapper[UUID]):
    def __init__(self, transcoder: Any, keys: KeyStore) -> None:
        super().__init__(transcoder=transcoder)
        self.keys = keys
        self.find_slot: Callable[[UUID], UUID | None] | None = None  # set by the event log
        # Keyed by the UUIDs' `int` (a slot of the object, hashed in C): `UUID.__hash__` is Python, and
        # a batch of 500 notes hashed its key ids ~15 times a note (~4 µs a note, profiled).
        self._ciphers: dict[int, tuple[AESGCM, bytes]] = {}  # key id → writing cipher, header
        # An `EGK2` header (key id, being, slot) → its reading cipher and the key store's
        # `destroyed_version` when it was checked: bytes hash in C, so a cached event builds no UUID.
        self._readers: dict[bytes, tuple[AESGCM, int]] = {}
        # id(event) → (the event, its cipher, header, nonce), decided by `prepare` for the save under
        # way; the event is held, so its id cannot be reused while its entry is here.
        self._planned: dict[int, tuple[DomainEventProtocol[UUID], AESGCM, bytes, bytes, list[int]]] = {}

    def _fresh(self, key_id: UUID, cached: tuple[AESGCM, bytes] | None) -> tuple[AESGCM, bytes] | None:
        if cached is not None and self.keys.is_destroyed(key_id):  # destroyed by another process since
            self._ciphers.pop(key_id.int, None)
            return None
        return cached

    def _remember(self, key_id: UUID, key: bytes, header: bytes) -> tuple[AESGCM, bytes]:
        if len(self._ciphers) >= _MAX_CIPHERS:  # one per item now (ADR 0075): bounded
            self._ciphers.clear()
        entry = self._ciphers[key_id.int] = (AESGCM(key), header)
        return entry

    def _writer(self, choice: KeyChoice) -> tuple[AESGCM, bytes]:
        """The cipher and header to seal an event under the chosen key."""
        entry = self._fresh(choice.key_id, self._ciphers.get(choice.key_id.int))
        if entry is not None:
            return entry
        if choice.is_being_key:
            key = self.keys.key_for_writing(choice.key_id)
            if key is None:
                raise ContentErased(f"being {choice.key_id} was forgotten: nothing can be written for it")
            return self._remember(choice.key_id, key, header_for(choice.key_id))
        found = self._from_log(choice) or self.keys.slot_for_writing(
            choice.key_id, being_id=choice.being_id, subject=choice.subject, item_id=choice.item_id
        )
        if found is None:
            raise ContentErased(f"item {choice.key_id} was forgotten: nothing can be written for it")
        slot, key = found
        header = MAGIC_ITEM + choice.key_id.bytes + choice.being_id.bytes + slot.bytes
        return self._remember(choice.key_id, key, header)

    def _from_log(self, choice: KeyChoice) -> tuple[UUID, bytes] | None:
        """The slot and key of an item written before (by any process), from the header of its
        aggregate's first event: one lookup by the log's primary key, so the key store needs no index
        on key ids (one more random index entry per new key, ADR 0075)."""
        if self.find_slot is None:
            return None
        slot = self.find_slot(choice.key_id)
        if slot is None:
            return None
        try:
            return slot, self.keys.key_of_slot(slot, choice.key_id, choice.being_id)
        except (KeyDestroyed, KeyStoreError):
            return None  # the store answers (None: destroyed, nothing more is written under it)

    def _reader(self, state: bytes) -> AESGCM:
        if bytes(state[:4]) != MAGIC_ITEM:  # `EGK1`: a being's key (or one sealed before item keys)
            key_id = key_id_of(state)
            entry = self._fresh(key_id, self._ciphers.get(key_id.int))
            if entry is None:
                entry = self._remember(key_id, self.keys.key_for_reading(key_id), header_for(key_id))
            return entry[0]
        # Nothing destroyed since this header's cipher was checked: reuse it, building no UUID (a
        # rebuild opens every event; three UUIDs a header were ~6 µs an event).
        header, version = bytes(state[:_ITEM_HEADER]), self.keys.destroyed_version()
        cached = self._readers.get(header)
        if cached is not None and cached[1] == version:
            return cached[0]
        if len(self._readers) >= _MAX_CIPHERS:
            self._readers.clear()
        slot, key_id = slot_of(state), key_id_of(state)
        assert slot is not None  # an `EGK2` header names its slot
        # `key_of_slot` raises `KeyDestroyed` if the key or its being was destroyed.
        cipher = AESGCM(self.keys.key_of_slot(slot, key_id, being_of(state) or key_id))
        self._readers[header] = (cipher, version)
        return cipher

    def prepare(self, events: Sequence[DomainEventProtocol[UUID]]) -> None:
        """Decide once, for a whole save, each event's key, cipher and nonce (ADR 0075): the save's
        new item and subject keys are taken in one call (at most one write to the key store's disk
        for a batch of 500 notes), each key's cipher is built once, the nonces come from one read of
        the system's randomness, and `to_stored_event` only encrypts. An event not prepared (a
        snapshot, a direct call) takes the same decisions one event at a time."""
        picked: list[tuple[DomainEventProtocol[UUID], int]] = []  # (event, its key id's int)
        # By the ids' `int` (see `_ciphers`); None: a key this save must take.
        writers: dict[int, tuple[AESGCM, bytes] | None] = {}
        wanted: list[KeyChoice] = []  # one per key to take, in the order of first use
        new: list[UUID] = []  # each once: only an aggregate's first event creates it
        ciphers = self._ciphers
        for event in events:
            cls = type(event)
            if getattr(cls, "stored_in_clear", False):
                continue
            state = vars(event)
            owner = _owner(state)
            if owner is None:
                continue
            choice = choose_key(get_topic(cls), event.originator_id, owner, state)
            key_id = choice.key_id
            number = key_id.int
            picked.append((event, number))
            if number in writers:
                continue
            if number == owner.int:  # the being's key
                writers[number] = self._writer(choice)
                continue
            writer = writers[number] = self._fresh(key_id, ciphers.get(number))
            if writer is None:
                if event.originator_version == 1 and number == event.originator_id.int:
                    new.append(key_id)  # created by this save: no key can exist for it yet
                else:
                    found = self._from_log(choice)
                    if found is not None:
                        header = MAGIC_ITEM + key_id.bytes + choice.being_id.bytes + found[0].bytes
                        writers[number] = self._remember(key_id, found[1], header)
                        continue
                wanted.append(choice)
        if not picked:
            return
        if wanted:
            taken = self.keys.create_keys(wanted, new)
            beings: dict[int, bytes] = {}  # a being's header bytes, built once a save
            for choice, found in zip(wanted, taken, strict=True):
                if found is not None:  # None: destroyed, refused by the per-event path below
                    slot, key = found
                    key_id = choice.key_id
                    being = beings.get(choice.being_id.int)
                    if being is None:
                        being = beings[choice.being_id.int] = choice.being_id.bytes
                    # `int.to_bytes`: `UUID.bytes` without its Python property call (two per new key).
                    header = (
                        MAGIC_ITEM + key_id.int.to_bytes(16, "big") + being + slot.int.to_bytes(16, "big")
                    )
                    writers[key_id.int] = self._remember(key_id, key, header)
        if len(self._planned) > _MAX_PLANNED:  # left by saves that failed before their events were written
            self._planned.clear()
        nonces = os.urandom(_NONCE * len(picked))
        planned = self._planned
        left = [len(picked)]  # the save's events still to encrypt: the last one waits for its keys
        for i, (event, number) in enumerate(picked):
            writer = writers[number]
            if writer is not None:
                nonce = nonces[i * _NONCE : (i + 1) * _NONCE]
                planned[id(event)] = (event, writer[0], writer[1], nonce, left)
            else:
                left[0] -= 1

    def _settle(self) -> None:
        try:
            self.keys.settle()
        except BaseException:
            self._ciphers.clear()  # they may hold keys that never reached the disk
            raise

    def forget_cipher(self, key_id: UUID) -> None:
        """Drop the cached cipher of a destroyed key (this process no longer decrypts with it)."""
        self._ciphers.pop(key_id.int, None)
        self._readers.clear()  # by slot: cheap to fill again, and erasure is rare

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        topic = get_topic(domain_event.__class__)
        event_state = dict(vars(domain_event))
        originator_id = event_state.pop("originator_id")
        originator_version = event_state.pop("originator_version")
        class_version = getattr(type(domain_event), "class_version", 1)
        if class_version > 1:
            event_state["class_version"] = class_version
        # Each prepared nonce is taken out as it is used: no nonce seals two events. An event `prepare`
        # planned is one of a being (it planned no other): no need to look for its owner again.
        planned = self._planned.pop(id(domain_event), None) if self._planned else None
        if planned is not None and planned[0] is not domain_event:
            planned = None
        if planned is None:
            in_clear = getattr(type(domain_event), "stored_in_clear", False)
            owner = None if in_clear else _owner(event_state)
        state = self.transcoder.encode(event_state)
        if planned is not None:
            _, cipher, header, nonce, left = planned
            left[0] -= 1
            if left[0] <= 0:
                self._settle()  # the save's new keys were being written meanwhile: on disk now
        elif owner is not None:
            self._settle()  # a key taken by `prepare` must be on disk before any event is written
            oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
            cipher, header = self._writer(choose_key(topic, oid, owner, event_state))
            nonce = os.urandom(_NONCE)
        else:
            return StoredEvent(
                originator_id=originator_id, originator_version=originator_version, topic=topic, state=state
            )
        aad = _aad(originator_id, originator_version, topic)
        state = header + nonce + cipher.encrypt(nonce, state, aad)
        return StoredEvent(
            originator_id=originator_id, originator_version=originator_version, topic=topic, state=state
        )

    def open_state(self, originator_id: Any, version: int, topic: str, state: bytes) -> bytes | None:
        """The transcoded state of a sealed event; None if its key was destroyed."""
        try:
            cipher = self._reader(state)
        except KeyDestroyed:
            return None
        body = bytes(state[_ITEM_HEADER if bytes(state[:4]) == MAGIC_ITEM else _HEADER :])
        return cipher.decrypt(body[:_NONCE], body[_NONCE:], _aad(originator_id, version, topic))

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        state = stored_event.state
        if not sealed(state):
            return super().to_domain_event(stored_event)  # written in clear (no being, or before ADR 0073)
        try:
            opened = self.open_state(
                stored_event.originator_id, stored_event.originator_version, stored_event.topic, state
            )
        except KeyDestroyed:
            opened = None
        except Exception as exc:
            raise MapperDeserialisationError(
                f"cannot decrypt stored event {stored_event.originator_id} v{stored_event.originator_version}: {exc!r}"
            ) from exc
        if opened is None:
            return cast(
                DomainEventProtocol[UUID],
                erased(
                    stored_event.originator_id, stored_event.originator_version, stored_event.topic, state
                ),
            )
        clear = StoredEvent(
            originator_id=stored_event.originator_id,
            originator_version=stored_event.originator_version,
            topic=stored_event.topic,
            state=opened,
        )
        return super().to_domain_event(clear)


def first_slot(recorder: Any, key_id: UUID) -> UUID | None:
    """The slot named by the first stored event of aggregate `key_id` (an item, a node, a
    conversation: the aggregate whose id is the key id), if it is sealed under that key."""
    for stored in recorder.select_events(key_id, limit=1):
        state = bytes(stored.state[:_ITEM_HEADER])
        if state[:4] == MAGIC_ITEM and state[4:_HEADER] == key_id.bytes:
            return UUID(bytes=state[_HEADER + 16 : _ITEM_HEADER])
    return None


def has_sealed_events(app: Any) -> bool:
    """Whether the log holds an event sealed by this mapper (one scan; asked only when no key store
    exists, to refuse to start rather than read every sealed event as erased)."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table

    recorder = app.recorder
    if isinstance(recorder, SQLiteApplicationRecorder):
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT 1 FROM {recorder.events_table_name} WHERE substr(state, 1, 4) IN (?, ?) LIMIT 1",
                [*MAGICS],
            )
            return c.fetchone() is not None
    if on_postgres(recorder):
        table = pg_events_table(recorder)
        with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(
                f"SELECT 1 FROM {table} WHERE substr(state, 1, 4) IN (%s, %s) LIMIT 1".encode(), [*MAGICS]
            )
            return curs.fetchone() is not None
    return False


def seal_state(
    key: bytes, header: bytes, originator_id: UUID, version: int, topic: str, clear: bytes, nonce: bytes
) -> bytes:
    """The stored form of an event's transcoded state sealed under `key` behind `header`, as
    `to_stored_event` writes it (for `keys seal`, ADR 0095, which rewrites old events' bytes)."""
    return header + nonce + AESGCM(key).encrypt(nonce, clear, _aad(originator_id, version, topic))
