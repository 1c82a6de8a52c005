# ruff: noqa: S608  (table names from the library's recorders, values as parameters)
"""The mapper that encrypts what the log stores, with the key of the being each event belongs to
(crypto-shredding, ADR 0073).

An event's whole transcoded state is sealed with AES-256-GCM (`cryptography`), behind a clear
header naming the key:

    b"EGK1" | key id (16 bytes) | nonce (12 bytes) | ciphertext and tag

The key id is the being's id, or an item's or a subject's (`key_choice.py`, ADR 0075).

The associated data binds the ciphertext to its place in the log (originator id, version, topic),
so sealed state cannot be moved to another event unnoticed. Events of no being (tokens, the
receipts of erasures) are stored as before, in clear; so are the events written before this mapper
(ADR 0074): the header tells the two apart. When the key is destroyed the event reads as an
`ErasedContent`: it existed, its content is gone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic

from engram.adapters.eventstore.key_choice import KeyChoice, choose_key
from engram.domain.erasure import ContentErased, ErasedContent
from engram.services.key_store import KeyDestroyed, KeyStore

MAGIC = b"EGK1"
_HEADER = len(MAGIC) + 16
_NONCE = 12
_MAX_CIPHERS = 50_000


def sealed(state: bytes) -> bool:
    return state[:4] == MAGIC


def key_id_of(state: bytes) -> UUID:
    return UUID(bytes=bytes(state[4:_HEADER]))


def header_for(key_id: UUID) -> bytes:
    """The first bytes of every event sealed under `key_id` (to find them without decrypting)."""
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
    return b"%s|%d|%s" % (oid.bytes, version, topic.encode())


def erased(originator_id: Any, version: int, topic: str, state: bytes) -> ErasedContent:
    oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
    return ErasedContent(oid, version, key_id_of(state), topic)


class ShreddingMapper(Mapper[UUID]):
    def __init__(self, transcoder: Any, keys: KeyStore) -> None:
        super().__init__(transcoder=transcoder)
        self.keys = keys
        self._ciphers: dict[UUID, AESGCM] = {}

    def _cipher(self, key_id: UUID, *, writing: KeyChoice | None) -> AESGCM:
        cipher = self._ciphers.get(key_id)
        if cipher is not None and self.keys.is_destroyed(key_id):  # destroyed by another process since
            self._ciphers.pop(key_id, None)
            cipher = None
        if cipher is None:
            if writing is not None:
                if writing.is_being_key:
                    key = self.keys.key_for_writing(key_id)
                else:
                    key = self.keys.key_for_writing(
                        key_id, being_id=writing.being_id, subject=writing.subject, item_id=writing.item_id
                    )
                if key is None:
                    what = "being" if writing.is_being_key else "item"
                    raise ContentErased(f"{what} {key_id} was forgotten: nothing can be written for it")
            else:
                key = self.keys.key_for_reading(key_id)
            if len(self._ciphers) >= _MAX_CIPHERS:  # one per item now (ADR 0075): bounded
                self._ciphers.clear()
            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    def prepare(self, events: Sequence[DomainEventProtocol[UUID]]) -> None:
        """Create the item and subject keys a save will need, in one write (ADR 0075): a batch of
        500 notes then costs one write to the key store's disk, not 500."""
        wanted = []
        for event in events:
            if getattr(type(event), "stored_in_clear", False):
                continue
            state = vars(event)
            owner = _owner(state)
            if owner is None:
                continue
            choice = choose_key(get_topic(type(event)), event.originator_id, owner, state)
            if not choice.is_being_key and choice.key_id not in self._ciphers:
                wanted.append((choice.key_id, choice.being_id, choice.subject, choice.item_id))
        if wanted:
            self.keys.create_keys(wanted)

    def forget_cipher(self, key_id: UUID) -> None:
        """Drop the cached cipher of a destroyed key (this process no longer decrypts with it)."""
        self._ciphers.pop(key_id, None)

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        topic = get_topic(domain_event.__class__)
        event_state = dict(vars(domain_event))
        originator_id = event_state.pop("originator_id")
        originator_version = event_state.pop("originator_version")
        class_version = getattr(type(domain_event), "class_version", 1)
        if class_version > 1:
            event_state["class_version"] = class_version
        owner = None if getattr(type(domain_event), "stored_in_clear", False) else _owner(event_state)
        state = self.transcoder.encode(event_state)
        if owner is not None:
            oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
            choice = choose_key(topic, oid, owner, event_state)
            nonce = os.urandom(_NONCE)
            aad = _aad(originator_id, originator_version, topic)
            cipher = self._cipher(choice.key_id, writing=choice)
            state = header_for(choice.key_id) + nonce + cipher.encrypt(nonce, state, aad)
        return StoredEvent(
            originator_id=originator_id, originator_version=originator_version, topic=topic, state=state
        )

    def open_state(self, originator_id: Any, version: int, topic: str, state: bytes) -> bytes | None:
        """The transcoded state of a sealed event; None if its key was destroyed."""
        key_id = key_id_of(state)
        try:
            cipher = self._cipher(key_id, writing=None)
        except KeyDestroyed:
            return None
        body = bytes(state[_HEADER:])
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


def has_sealed_events(app: Any) -> bool:
    """Whether the log holds an event sealed by this mapper (one scan; asked only when no key store
    exists, to refuse to start rather than read every sealed event as erased)."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table

    recorder = app.recorder
    if isinstance(recorder, SQLiteApplicationRecorder):
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT 1 FROM {recorder.events_table_name} WHERE substr(state, 1, 4) = ? LIMIT 1", [MAGIC]
            )
            return c.fetchone() is not None
    if on_postgres(recorder):
        table = pg_events_table(recorder)
        with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(f"SELECT 1 FROM {table} WHERE substr(state, 1, 4) = %s LIMIT 1".encode(), [MAGIC])
            return curs.fetchone() is not None
    return False
