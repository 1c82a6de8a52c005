"""Which key seals an event (ADR 0075), and the store of item and subject keys, without a database."""

from __future__ import annotations

import json
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from engram.adapters import owned_keys
from engram.adapters.eventstore.event_log import EventLog
from engram.adapters.eventstore.key_choice import KeyChoice, choose_key
from engram.adapters.eventstore.shredding import ShreddingMapper, key_id_of, slot_of
from engram.adapters.key_files import LocalKeyStore
from engram.domain.being import Being
from engram.domain.erasure import ContentErased, ErasedContent
from engram.domain.ids import conversation_id_for
from engram.domain.note import Note
from engram.services.key_store import KeyDestroyed, KeyStoreError

AT = datetime(2026, 3, 1, tzinfo=UTC)
BEING, ITEM, NOTE = uuid4(), uuid4(), uuid4()


@pytest.mark.parametrize(
    ("topic", "state", "expected"),
    [
        ("engram.Note.Noted", {"text": "t"}, KeyChoice(ITEM, BEING, None, ITEM)),
        ("engram.Note.Embedded", {}, KeyChoice(ITEM, BEING, None, ITEM)),
        ("engram.Message.Received", {"user": "mina"}, KeyChoice(ITEM, BEING, "mina", ITEM)),
        ("engram.Fact.Stated", {"subject": "mina"}, KeyChoice(ITEM, BEING, "mina", ITEM)),
        ("engram.Conversation.Started", {"user": "mina"}, KeyChoice(ITEM, BEING, "mina", None)),
        ("engram.MemoryNode.Created", {"source_note_id": NOTE}, KeyChoice(ITEM, BEING, None, NOTE)),
        ("engram.MemoryNode.Pinned", {}, KeyChoice(ITEM, BEING, None, None)),
        ("engram.Extraction.Opened", {"message_id": NOTE}, KeyChoice(NOTE, BEING, None, NOTE)),
        # a summary (v2) under a key of its own, tagged with its conversation (ADR 0093); v1: the conversation's
        ("engram.Conversation.RollingSummarized", {"summary_key": NOTE}, KeyChoice(NOTE, BEING, None, ITEM)),
        ("engram.Conversation.SpineWritten", {"summary_key": None}, KeyChoice(ITEM, BEING, None, None)),
        ("engram.Being.ThinkWritten", {"text": "t"}, KeyChoice(BEING, BEING)),
        ("engram.ExtractionCursor.Skipped", {}, KeyChoice(BEING, BEING)),
        (
            "eventsourcing.domain:Snapshot",
            {"topic": "engram.Message", "state": {"user": "mina"}},
            KeyChoice(ITEM, BEING, "mina", ITEM),
        ),
        ("eventsourcing.domain:Snapshot", {"topic": "engram.Being", "state": {}}, KeyChoice(BEING, BEING)),
    ],
)
def test_the_key_of_an_event(topic: str, state: dict[str, object], expected: KeyChoice) -> None:
    assert choose_key(topic, ITEM, BEING, state) == expected


def test_a_conversation_key_is_the_conversation_id() -> None:
    conversation = conversation_id_for(BEING, "mina")
    assert choose_key("engram.Conversation.Heard", conversation, BEING, {}).key_id == conversation


def _mapper(tmp_path: Path) -> tuple[ShreddingMapper, LocalKeyStore]:
    keys = LocalKeyStore(tmp_path / "keys.json")
    return ShreddingMapper(EventLog.construct_transcoder(EventLog.__new__(EventLog)), keys), keys


def test_item_keys_are_tagged_private_and_destroyed_with_their_being(tmp_path: Path) -> None:
    mapper, keys = _mapper(tmp_path)
    being = uuid4()
    note = Note.take(uuid4(), being, "todo", "the secret", AT)
    [noted] = note.collect_events()
    stored = mapper.to_stored_event(noted)
    assert key_id_of(stored.state) == note.id
    owned = tmp_path / "keys.owned.sqlite3"
    assert stat.S_IMODE(owned.stat().st_mode) == 0o600
    assert keys.owned_keys(being) == [note.id] and keys.owned_keys(uuid4()) == []
    assert not (tmp_path / "keys.json").exists()  # an item key is a row of the owned file, not JSON
    fresh = LocalKeyStore(tmp_path / "keys.json")  # another process reads the key
    assert fresh.key_for_reading(note.id) == keys.key_for_reading(note.id)
    assert keys.destroy_many(keys.owned_keys(being)) == 1 and keys.owned_keys(being) == []
    mapper.forget_cipher(note.id)
    assert isinstance(mapper.to_domain_event(stored), ErasedContent)
    with pytest.raises(ContentErased):
        mapper.to_stored_event(noted)  # nothing more is written under the destroyed key
    assert keys.destroy_many([note.id]) == 0  # twice: nothing more


def test_an_owned_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    mapper, _ = _mapper(tmp_path)
    [noted] = Note.take(uuid4(), uuid4(), "todo", "x", AT).collect_events()
    mapper.to_stored_event(noted)
    (tmp_path / "keys.owned.sqlite3").chmod(0o644)
    with pytest.raises(KeyStoreError, match="chmod 600"):
        LocalKeyStore(tmp_path / "keys.json")


def test_a_key_file_of_before_item_keys_still_loads(tmp_path: Path) -> None:
    being = uuid4()
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"version": 1, "keys": {being.hex: "A" * 43 + "="}}))
    path.chmod(0o600)
    store = LocalKeyStore(path)
    assert len(store.key_for_reading(being)) == 32 and store.owned_keys(being) == []


def test_a_key_created_after_another_was_destroyed_is_found_by_every_process(tmp_path: Path) -> None:
    writer, reader = LocalKeyStore(tmp_path / "keys.json"), LocalKeyStore(tmp_path / "keys.json")
    being, first, last, later = uuid4(), uuid4(), uuid4(), uuid4()
    slots = {}
    for item in (first, last):
        found = writer.slot_for_writing(item, being_id=being, subject=None, item_id=item)
        assert found is not None
        slots[item] = found
    slot, key = slots[last]
    assert reader.key_of_slot(slot, last, being) == key  # another process reads it by its slot
    writer.destroy_many([last])
    found = writer.slot_for_writing(later, being_id=being, subject=None, item_id=later)
    assert found is not None and found[0] not in {s for s, _ in slots.values()}  # a slot serves one key
    assert reader.key_of_slot(found[0], later, being) == found[1]
    assert (
        writer.slot_for_writing(last, being_id=being, subject=None, item_id=last) is None
    )  # stays destroyed
    with pytest.raises(KeyDestroyed):
        LocalKeyStore(tmp_path / "keys.json").key_of_slot(slot, last, being)  # a process started now


def test_a_prepared_batch_is_sealed_as_one_event_at_a_time_is_with_a_fresh_nonce_each(
    tmp_path: Path,
) -> None:
    """`prepare` decides each event's key, slot and nonce once for the whole save (ADR 0075); what it
    writes must be what the event-by-event path writes, and no nonce may serve twice."""
    mapper, keys = _mapper(tmp_path)
    registered, _, _ = Being.register("Aria", AT)
    registered.collect_events()
    being = registered.id
    notes = [Note.take(uuid4(), being, "todo", f"secret {i}", AT) for i in range(40)]
    events = [e for n in notes for e in n.collect_events()]
    registered.write_think_md("a thought", AT)
    [thought] = registered.collect_events()
    mapper.prepare([*events, thought])
    stored = [mapper.to_stored_event(e) for e in [*events, thought]]
    again = [mapper.to_stored_event(e) for e in events]  # not prepared any more: the per-event path
    assert [key_id_of(s.state) for s in stored] == [*[n.id for n in notes], being]
    assert [key_id_of(s.state) for s in again] == [n.id for n in notes]
    assert [s.state[:52] for s in again] == [s.state[:52] for s in stored[:-1]]  # same key, same slot
    nonces = {bytes(s.state[52:64]) for s in [*stored[:-1], *again]} | {bytes(stored[-1].state[20:32])}
    assert len(nonces) == 2 * len(events) + 1
    fresh = ShreddingMapper(mapper.transcoder, LocalKeyStore(tmp_path / "keys.json"))  # another process
    assert [fresh.to_domain_event(s).text for s in stored[:-1]] == [f"secret {i}" for i in range(40)]  # type: ignore[attr-defined]
    assert keys.owned_keys(being) and sorted(keys.owned_keys(being)) == sorted(n.id for n in notes)


def test_a_prepared_event_of_a_destroyed_key_is_still_refused(tmp_path: Path) -> None:
    mapper, keys = _mapper(tmp_path)
    being = uuid4()
    note = Note.take(uuid4(), being, "todo", "the secret", AT)
    [noted] = note.collect_events()
    mapper.to_stored_event(noted)
    keys.destroy_many([note.id])
    mapper.forget_cipher(note.id)
    mapper.prepare([noted])
    with pytest.raises(ContentErased):
        mapper.to_stored_event(noted)


def _batch(being: UUID, count: int) -> list[Any]:
    notes = [Note.take(uuid4(), being, "todo", f"secret {i}", AT) for i in range(count)]
    return [e for n in notes for e in n.collect_events()]


def test_a_batch_keys_are_on_disk_once_its_last_event_is_sealed(tmp_path: Path) -> None:
    """A batch's keys are written by the background thread while the batch is encrypted (ADR 0075);
    the last event's sealing waits for them, so the log never holds an event whose key could be lost."""
    mapper, _ = _mapper(tmp_path)
    being = uuid4()
    events = _batch(being, 300)
    mapper.prepare(events)
    stored = [mapper.to_stored_event(e) for e in events]
    other = LocalKeyStore(tmp_path / "keys.json")  # another process, reading the file as it is now
    for s in stored:
        slot = slot_of(s.state)
        assert slot is not None and len(other.key_of_slot(slot, key_id_of(s.state), being)) == 32


def test_a_batch_whose_keys_cannot_be_written_is_refused_and_its_keys_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapper, _ = _mapper(tmp_path)
    being = uuid4()
    events = _batch(being, 300)
    real = owned_keys._Block.insert  # a block's one row (ADR 0094)

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(owned_keys._Block, "insert", full_disk)
    mapper.prepare(events)
    *first, last = events
    for e in first:
        mapper.to_stored_event(e)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        mapper.to_stored_event(last)  # the last event of the batch waits for its keys: refused
    monkeypatch.setattr(owned_keys._Block, "insert", real)
    mapper.prepare(events)  # the retry takes keys again, written this time
    stored = [mapper.to_stored_event(e) for e in events]
    other = LocalKeyStore(tmp_path / "keys.json")
    assert all(other.key_of_slot(slot_of(s.state) or uuid4(), key_id_of(s.state), being) for s in stored)


def test_another_process_finds_an_item_key_from_the_log_and_takes_no_second_key(tmp_path: Path) -> None:
    """The owned-key file has no index on key ids (ADR 0075): a process writing a later event of an
    item finds the item's slot in the header of its first event in the log."""
    mapper, store = _mapper(tmp_path)
    being = uuid4()
    note = Note.take(uuid4(), being, "todo", "the secret", AT)
    [noted] = note.collect_events()
    mapper.prepare([noted])
    first = mapper.to_stored_event(noted)
    other, other_store = _mapper(tmp_path)  # another process, with the log holding the note's first event
    asked: list[UUID] = []
    other.find_slot = lambda key_id: (
        asked.append(key_id) or (slot_of(first.state) if key_id == note.id else None)
    )
    later = type(noted)(**{**vars(noted), "originator_version": 2})
    other.prepare([later])
    again = other.to_stored_event(later)
    assert asked == [note.id] and again.state[:52] == first.state[:52]  # same key id, being and slot
    store.close()
    other_store.close()  # their tags written
    rows = sqlite3.connect(tmp_path / "keys.owned.sqlite3").execute(
        "SELECT count(*) FROM block_tags WHERE key_id = ?", [note.id.hex]
    )
    assert rows.fetchone()[0] == 1
    assert other.to_domain_event(again).text == "the secret"  # type: ignore[attr-defined]
