"""Item keys as one row per block (ADR 0094): a block's keys one blob, a forgotten key zeroed in place
with its tombstone in the owned-key file (not `keys.json`), files of one row per key still read."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from engram.adapters.eventstore.event_log import EventLog
from engram.adapters.eventstore.shredding import ShreddingMapper
from engram.adapters.key_files import LocalKeyStore
from engram.domain.erasure import ContentErased, ErasedContent
from engram.domain.note import Note
from engram.services.key_store import KeyDestroyed

AT = datetime(2026, 3, 1, tzinfo=UTC)
Taken = tuple[UUID, UUID, bytes]  # key id, slot, key


def _take(store: LocalKeyStore, being: UUID, n: int, item: UUID | None = None) -> list[Taken]:
    wanted = [(uuid4(), being, "mina", item) for _ in range(n)]
    got = store.create_keys(wanted, [w[0] for w in wanted])
    store.settle()
    out = []
    for w, found in zip(wanted, got, strict=True):
        assert found is not None
        out.append((w[0], *found))
    return out


def _raw(tmp_path: Path) -> bytes:
    """Every byte of the key files as they lie on disk (the owned file, its WAL, `keys.json`)."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.name.startswith("keys."))


def test_a_batch_is_one_row_and_a_forgotten_key_is_zeroed_in_place_without_growing_keys_json(
    tmp_path: Path,
) -> None:
    store = LocalKeyStore(tmp_path / "keys.json")
    being = uuid4()
    assert store.key_for_writing(being) is not None
    batch = _take(store, being, 300)  # a batch: its keys written tagged, as one block
    singles = [_take(store, being, 1)[0] for _ in range(3)]  # from the pool
    store.owned.flush()
    with sqlite3.connect(store.owned.path) as db:
        rows = db.execute(
            "SELECT length(keys), ids IS NOT NULL FROM key_blocks WHERE being_id = ?", [being.hex]
        )
        assert sorted(rows) == [(16 * 32, 0), (300 * 32, 1)]  # the pool's first block, the batch's
    keys_json = (tmp_path / "keys.json").read_bytes()

    gone, kept = [batch[0], batch[1], singles[0]], [batch[2], singles[1]]
    assert all(key in _raw(tmp_path) for _, _, key in gone + kept)
    assert store.destroy_many([k for k, _, _ in gone]) == 3
    assert store.destroy_many([gone[0][0]]) == 0  # already forgotten: says so
    assert (tmp_path / "keys.json").read_bytes() == keys_json  # no tombstone per item there
    raw = _raw(tmp_path)
    assert not any(key in raw for _, _, key in gone)  # zeroed in place, in the file and its WAL
    assert all(key in raw for _, _, key in kept)
    with sqlite3.connect(store.owned.path) as db:
        [(keys,)] = db.execute("SELECT keys FROM key_blocks WHERE length(keys) = ?", [300 * 32])
        assert keys[:64] == bytes(64) and keys[64:96] == batch[2][2]

    other = LocalKeyStore(tmp_path / "keys.json")  # another process, started after
    assert all(other.is_destroyed(k) for k, _, _ in gone) and not other.is_destroyed(kept[0][0])
    assert all(other.key_of_slot(slot, k, being) == key for k, slot, key in kept)
    with pytest.raises(KeyDestroyed):
        other.key_of_slot(gone[0][1], gone[0][0], being)
    owned = set(other.owned_keys(being, subject="mina"))
    assert {k for k, _, _ in kept} <= owned and not owned & {k for k, _, _ in gone}
    assert other.owned_keys(being, subject="someone else") == []
    note = batch[5][0]
    quoting = _take(store, being, 260, item=note)  # a batch of keys quoting one item
    found = set(other.owned_keys(being, item_id=note))
    assert found == {note, *(k for k, _, _ in quoting)}
    assert set(other.owned_keys(being, subject="mina", item_id=note)) == found
    assert len(other.untagged_slots(being)) == 16 - 3  # the pool slots `store` reserved, not used yet
    assert store.untagged_slots(being) == []  # ... which `store` knows it never handed out
    store.close()  # its unused pool slots are zeroed: nothing is left untagged
    assert other.untagged_slots(being) == []
    other.close()


def test_an_item_key_destroyed_by_another_deployment_stops_sealing_and_opening_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engram.adapters.key_files as key_files

    monkeypatch.setattr(key_files, "_RECHECK_S", 0.0)  # no staleness allowed in this test
    keys = LocalKeyStore(tmp_path / "keys.json")
    mapper = ShreddingMapper(EventLog.construct_transcoder(EventLog.__new__(EventLog)), keys)
    note = Note.take(uuid4(), uuid4(), "todo", "the secret", AT)
    [noted] = note.collect_events()
    stored = mapper.to_stored_event(noted)
    assert not isinstance(mapper.to_domain_event(stored), ErasedContent)  # its ciphers are cached now
    other = LocalKeyStore(tmp_path / "keys.json")  # another deployment on the same data dir
    assert other.destroy_many([note.id]) == 1
    assert not (tmp_path / "keys.json").exists() or note.id.hex not in (tmp_path / "keys.json").read_text()
    assert isinstance(mapper.to_domain_event(stored), ErasedContent)
    with pytest.raises(ContentErased):
        mapper.to_stored_event(noted)
    keys.close()
    other.close()


_OLD_SCHEMA = """
CREATE TABLE key_slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    slot TEXT NOT NULL UNIQUE,
    being_id TEXT NOT NULL,
    key_id TEXT,
    subject TEXT,
    item_id TEXT,
    key BLOB NOT NULL
);
CREATE INDEX key_slots_being ON key_slots (being_id);
"""


def test_an_owned_key_file_of_one_row_per_key_still_reads_tags_exports_and_forgets(tmp_path: Path) -> None:
    """The layout of ADR 0075 before this one: one row per key in `key_slots`."""
    path = tmp_path / "keys.owned.sqlite3"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    being, first, second = uuid4(), uuid4(), uuid4()
    slots = [uuid4() for _ in range(3)]
    material = [os.urandom(32) for _ in slots]
    with sqlite3.connect(path) as db:
        db.executescript(_OLD_SCHEMA)
        db.executemany(
            "INSERT INTO key_slots (slot, being_id, key_id, subject, item_id, key) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (slots[0].hex, being.hex, first.hex, "mina", None, material[0]),
                (slots[1].hex, being.hex, second.hex, None, first.hex, material[1]),
                (slots[2].hex, being.hex, None, None, None, material[2]),  # its tag lost
            ],
        )
    store = LocalKeyStore(tmp_path / "keys.json")
    store.create()
    assert store.key_for_writing(being) is not None
    assert [store.key_of_slot(s, first, being) for s in slots] == material
    assert store.owned_keys(being, subject="mina") == [first]
    assert set(store.owned_keys(being, item_id=first)) == {first, second}
    assert store.untagged_slots(being) == [slots[2]]
    third = uuid4()
    store.tag_slot(slots[2], third, "mina", None)
    assert set(store.owned_keys(being, subject="mina")) == {first, third}
    exported = store.export_keys(being)
    assert {s.hex for s in slots} <= set(exported)
    new = _take(store, being, 2)  # new keys go to blocks, beside the old rows
    assert store.destroy_many([first, second]) == 2
    assert not any(key in _raw(tmp_path) for key in material[:2])
    assert set(store.owned_keys(being)) == {third, *[k for k, _, _ in new]}
    assert store.key_of_slot(slots[2], third, being) == material[2]
    with pytest.raises(KeyDestroyed):
        store.key_of_slot(slots[0], first, being)
    store.close()


def test_the_owned_key_maps_stay_bounded_and_every_key_is_found_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-running process takes and reads keys without end: each in-memory map keeps at most
    `_MAX_CACHED` keys, and a key it dropped is found again (to read, to write more events under
    it, to forget it) from the log's header and its block."""
    import engram
    from engram.adapters import owned_keys
    from engram.services.commands import NoteInput

    monkeypatch.setattr(owned_keys, "_MAX_CACHED", 40)
    with engram.open(tmp_path / "data", embedder="hashing", llm="none") as memory:
        memory.beings.register("Aria")
        singles = [memory.notes.take("Aria", NoteInput(kind="todo", text=f"errand {i}")) for i in range(60)]
        memory.notes.take_many("Aria", [NoteInput(kind="todo", text=f"batch {i}") for i in range(300)])
        owned = memory.store.app.keys.owned  # type: ignore[attr-defined]
        assert len(owned._by_key) <= 40 + 300 and len(owned._by_slot) <= 40 + 4096
        memory.store.app.mapper._readers.clear()  # type: ignore[attr-defined]  # read from the key store
        owned._by_slot.clear()
        texts = {n.text for n in memory.listing.notes("Aria", limit=1000)}
        assert {f"errand {i}" for i in range(60)} | {f"batch {i}" for i in range(300)} <= texts
        memory.note_lifecycle.supersede(
            "Aria", singles[0].note_id, singles[1].note_id
        )  # more events, old keys
        forgotten = memory.item_forgetting.forget_item("note", singles[2].note_id, by="test")
        assert forgotten.counts["keys_destroyed"] >= 1
        left = {n.text for n in memory.listing.notes("Aria", limit=1000, include_inactive=True)}
        assert "errand 2" not in left and {"errand 0", "errand 1", "errand 3"} <= left
        assert len(owned._by_key) <= 40 + 300 and len(owned._by_slot) <= 40 + 4096
