"""The key store's file and the sealing mapper (ADR 0073), without a database."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import MapperDeserialisationError, StoredEvent

from engram.adapters.eventstore.event_log import EventLog
from engram.adapters.eventstore.shredding import ShreddingMapper, sealed
from engram.adapters.key_files import LocalKeyStore
from engram.domain.erasure import ContentErased, ErasedContent, Erasure
from engram.domain.note import Note
from engram.services.key_store import KeyStoreError

AT = datetime(2026, 3, 1, tzinfo=UTC)


def _mapper(tmp_path: Path) -> tuple[ShreddingMapper, LocalKeyStore]:
    keys = LocalKeyStore(tmp_path / "keys.json")
    transcoder = EventLog.construct_transcoder(EventLog.__new__(EventLog))
    return ShreddingMapper(transcoder, keys), keys


def test_the_key_file_is_private_and_a_destroyed_key_leaves_a_tombstone(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys.json")
    being = uuid4()
    key = keys.key_for_writing(being)
    assert key is not None and len(key) == 32
    assert stat.S_IMODE((tmp_path / "keys.json").stat().st_mode) == 0o600
    assert LocalKeyStore(tmp_path / "keys.json").key_for_reading(being) == key  # another process reads it
    assert keys.export_keys(being) and keys.destroy(being) and not keys.destroy(being)
    assert keys.export_keys(being) == {} and keys.key_for_writing(being) is None
    assert key.hex() not in (tmp_path / "keys.json").read_text()


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    LocalKeyStore(tmp_path / "keys.json").key_for_writing(uuid4())
    os.chmod(tmp_path / "keys.json", 0o640)
    with pytest.raises(KeyStoreError, match="chmod 600"):
        LocalKeyStore(tmp_path / "keys.json")


def test_import_keys_adds_new_keys_and_keeps_a_destroyed_one_destroyed(tmp_path: Path) -> None:
    source, target = LocalKeyStore(tmp_path / "a.json"), LocalKeyStore(tmp_path / "b.json")
    kept, gone = uuid4(), uuid4()
    source.key_for_writing(kept)
    target.key_for_writing(gone)
    target.destroy(gone)
    assert target.import_keys({**source.export_keys(kept), gone.hex: source.export_keys(kept)[kept.hex]}) == 1
    assert target.key_for_reading(kept) == source.key_for_reading(kept) and target.is_destroyed(gone)


def test_sealed_events_read_back_and_read_as_erased_once_the_key_is_gone(tmp_path: Path) -> None:
    mapper, keys = _mapper(tmp_path)
    note = Note.take(uuid4(), uuid4(), "todo", "the zqxcanary secret", AT)
    [noted] = note.collect_events()
    stored = mapper.to_stored_event(noted)
    assert sealed(stored.state) and b"zqxcanary" not in stored.state
    assert mapper.to_domain_event(stored).text == "the zqxcanary secret"  # type: ignore[attr-defined]
    keys.destroy(note.id)  # a note has a key of its own (ADR 0075)
    mapper.forget_cipher(note.id)
    erased = mapper.to_domain_event(stored)
    assert isinstance(erased, ErasedContent) and erased.erased_topic == stored.topic
    with pytest.raises(ContentErased):
        erased.mutate(None)
    with pytest.raises(ContentErased):
        mapper.to_stored_event(noted)  # nothing is written under a destroyed key


def test_sealed_state_moved_to_another_event_is_refused(tmp_path: Path) -> None:
    mapper, _ = _mapper(tmp_path)
    note = Note.take(uuid4(), uuid4(), "todo", "text", AT)
    [noted] = note.collect_events()
    stored = mapper.to_stored_event(noted)
    moved = StoredEvent(uuid4(), stored.originator_version, stored.topic, stored.state)
    with pytest.raises(MapperDeserialisationError, match="cannot decrypt"):
        mapper.to_domain_event(moved)


def test_the_receipt_is_stored_in_clear(tmp_path: Path) -> None:
    mapper, _ = _mapper(tmp_path)
    receipt = Erasure.record(uuid4(), uuid4(), "being", "x", "admin", {"events": 3}, AT)
    [erased] = receipt.collect_events()
    stored = mapper.to_stored_event(erased)
    assert not sealed(stored.state) and b'"events":3' in stored.state.replace(b" ", b"")


def test_a_key_destroyed_by_another_process_stops_decrypting_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engram.adapters.key_files as key_files

    monkeypatch.setattr(key_files, "_RECHECK_S", 0.0)  # no staleness allowed in this test
    mapper, _ = _mapper(tmp_path)
    note = Note.take(uuid4(), uuid4(), "todo", "text", AT)
    [noted] = note.collect_events()
    stored = mapper.to_stored_event(noted)
    assert not isinstance(mapper.to_domain_event(stored), ErasedContent)  # its cipher is cached now
    assert LocalKeyStore(tmp_path / "keys.json").destroy(note.id)  # another process (a note has its own key)
    assert isinstance(mapper.to_domain_event(stored), ErasedContent)
    with pytest.raises(ContentErased):
        mapper.to_stored_event(noted)


def test_stores_writing_keys_at_once_keep_every_key(tmp_path: Path) -> None:
    """Several processes (here: stores with their own handles, on threads) adding keys at the same
    time: each re-reads the file under a file lock before writing, so no key is lost to a race."""
    import threading

    stores = [LocalKeyStore(tmp_path / "keys.json") for _ in range(4)]
    ids = [[uuid4() for _ in range(25)] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def add(store: LocalKeyStore, mine: list[Any]) -> None:
        barrier.wait()
        for key_id in mine:
            store.key_for_writing(key_id)

    threads = [threading.Thread(target=add, args=(s, m)) for s, m in zip(stores, ids, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh = LocalKeyStore(tmp_path / "keys.json")
    written = {key_id: stores[n].key_for_writing(key_id) for n, mine in enumerate(ids) for key_id in mine}
    assert all(fresh.key_for_reading(key_id) == key for key_id, key in written.items())
    assert len(written) == 100


def test_the_owned_key_file_opens_when_another_process_holds_it_while_turning_it_to_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processes opening a new owned-key file at once: SQLite answers `database is locked` at once
    (without waiting) to one asking for WAL while another converts the file; opening tries again."""
    import sqlite3

    from engram.adapters import owned_keys

    real_connect = sqlite3.connect
    refused: list[str] = []

    class Busy:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: Any) -> Any:
            if sql.startswith("PRAGMA journal_mode") and len(refused) < 2:
                refused.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.conn, name)

    monkeypatch.setattr(owned_keys.sqlite3, "connect", lambda *a, **k: Busy(real_connect(*a, **k)))
    keys = owned_keys.OwnedKeys(tmp_path / "keys.owned.sqlite3")
    being = uuid4()
    slot, key = keys.slot_for_writing(uuid4(), being, None, None)
    assert len(refused) == 2 and keys.key_of_slot(slot) == key
    keys.close()


def test_the_mappers_ciphers_stay_bounded_and_every_event_still_opens(tmp_path: Path) -> None:
    """One cipher per item key (ADR 0075), ~2.5 KB each: the mapper keeps at most `_MAX_CIPHERS`
    (ADR 0094), and an event whose cipher was dropped is sealed and opened again from its key."""
    from engram.adapters.eventstore import shredding

    mapper, keys = _mapper(tmp_path)
    being = uuid4()
    notes = [Note.take(uuid4(), being, "todo", f"errand {i}", AT) for i in range(shredding._MAX_CIPHERS + 50)]
    events = [e for note in notes for e in note.collect_events()]
    mapper.prepare(events)
    stored = [mapper.to_stored_event(e) for e in events]
    assert len(mapper._ciphers) <= shredding._MAX_CIPHERS < len(notes)  # some were dropped
    opened = [mapper.to_domain_event(s) for s in stored]
    assert len(mapper._readers) <= shredding._MAX_CIPHERS
    assert shredding._MAX_CIPHERS <= 4096  # ~10 MB of ciphers per direction at most
    assert [o.text for o in opened] == [f"errand {i}" for i in range(len(notes))]  # type: ignore[attr-defined]
    keys.close()
