"""The owned-key pool (ADR 0075): keys reserved in blocks flushed to disk, handed out with tags that
do not wait for the disk. A tag a power cut lost is recovered from the log when forgetting; a
process killed with reserved keys leaves them unused; no slot serves two keys."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from engram.adapters.eventstore.shredding import key_id_of, slot_of
from engram.domain.erasure import ErasedContent
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from tests.integration.test_erasure_items import CANARY, USER_CANARY, _plant
from tests.support import SeededIds, SteppingClock, sigkill_after_batches

CHILD = "tests.integration.key_pool_child"


def _owned_file(settings: Settings) -> Path:
    return settings.data_dir / "keys.owned.sqlite3"


def _slots_by_key(engram: Engram) -> dict[UUID, set[UUID]]:
    """Per slot named by a sealed header, the key ids sealed under it."""
    found: dict[UUID, set[UUID]] = defaultdict(set)
    for e in engram.store.app.recorder.select_notifications(1, 100_000):  # type: ignore[attr-defined]
        state = bytes(e.state)
        slot = slot_of(state)
        if slot is not None:
            found[slot].add(key_id_of(state))
    return found


def _texts(engram: Engram) -> str:
    return " ".join(
        e.model_dump_json() if hasattr(e, "model_dump_json") else repr(vars(e))
        for _, e in engram.store.decoded_events(1, 100_000)
    )


def test_tags_lost_to_a_power_cut_are_recovered_when_forgetting(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        ids = _plant(engram)
    finally:
        engram.close()
    # A power cut after the events reached the disk but before the tags did (synchronous=NORMAL):
    # every slot keeps its key and its being, and loses what it was handed to.
    with sqlite3.connect(_owned_file(settings)) as db:
        # A single note's key comes from the pool: its tags are rows of `block_tags` (ADR 0094).
        lost = db.execute("DELETE FROM block_tags").rowcount
    assert lost > 0
    engram = bootstrap(settings, clock=clock, ids=SeededIds(1000))
    try:
        aria = engram.forgetting._being_id("Aria")
        assert engram.store.app.keys.owned_keys(aria) == []  # type: ignore[attr-defined]
        assert CANARY in _texts(engram) and USER_CANARY in _texts(engram)  # read by their slots

        subject = engram.item_forgetting.forget_subject("Aria", "mina", by="admin")
        assert subject.counts["keys"] >= 3  # two messages, the fact (and the conversation)
        note = engram.item_forgetting.forget_item("note", ids["note"], by="admin")
        assert note.counts["keys"] == 2  # the note and its node, found again from the log

        erased = {
            e.originator_id
            for _, e in engram.store.decoded_events(1, 100_000)
            if isinstance(e, ErasedContent)
        }
        assert {UUID(ids["note"]), UUID(ids["message"]), UUID(ids["fact"])} <= erased
        assert UUID(ids["kept"]) not in erased and UUID(ids["other"]) not in erased
        text = _texts(engram)
        assert CANARY not in text and USER_CANARY not in text and "water the garden" in text
    finally:
        engram.close()


def test_a_process_killed_with_reserved_keys_loses_none_and_hands_none_out_twice(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        engram.beings.register("Aria")
        engram.beings.register("Bo")
    finally:
        engram.close()
    taken = sigkill_after_batches(CHILD, settings, 3, "10000")
    assert taken >= 3
    engram = bootstrap(settings, clock=clock, ids=SeededIds(5000))
    try:
        aria = engram.forgetting._being_id("Aria")
        keys = engram.store.app.keys  # type: ignore[attr-defined]
        # Untagged: reserved and unused, or used with tags still queued when it died (50 ms).
        orphans = set(keys.untagged_slots(aria)) - set(_slots_by_key(engram))
        assert orphans, "the child died holding reserved keys"
        texts = _texts(engram)
        assert all(f"child note {n}" in texts for n in range(taken))  # every note it wrote reads back
        for n in range(40):
            engram.notes.take("Aria", NoteInput(kind="todo", text=f"parent note {n}"))
        engram.notes.take("Bo", NoteInput(kind="todo", text="bo's note"))
        by_slot = _slots_by_key(engram)
        assert all(len(keys_of_slot) == 1 for keys_of_slot in by_slot.values())  # one key per slot
        assert not orphans & set(by_slot)  # the dead process's reserved keys were never used
        assert "parent note 39" in _texts(engram)

        done = engram.forgetting.forget_being("Aria", by="admin")
        assert not done.already
        with sqlite3.connect(_owned_file(settings)) as db:
            left = sum(
                db.execute(f"SELECT count(*) FROM {table} WHERE being_id = ?", [aria.hex]).fetchone()[0]
                for table in ("key_slots", "key_blocks")
            )
            tags = db.execute("SELECT count(*) FROM block_tags").fetchone()[0]
        assert left == 0  # used, reserved and orphaned keys alike
        assert tags == 1  # Bo's note's: Aria's went with her blocks
        assert "bo's note" in _texts(engram) and "parent note" not in _texts(engram)
    finally:
        engram.close()


def test_closing_a_deployment_ends_its_key_writer_and_closes_its_connections(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    """A process that opens and closes many deployments (a worker, a test run) keeps no key-writer
    thread nor its SQLite connections for the ones it closed."""
    engram = bootstrap(make_settings(), clock=clock, ids=SeededIds())
    engram.beings.register("Aria")
    engram.notes.take_many(
        "Aria", [NoteInput(kind="todo", text=f"errand {i}", idempotency_key=f"e{i}") for i in range(300)]
    )
    owned = engram.store.app.keys.owned  # type: ignore[attr-defined]
    writer = owned._writer
    assert writer is not None and writer.is_alive()  # the batch's keys went through it
    engram.close()
    writer.join(timeout=5)
    assert not writer.is_alive()
    assert owned._bg is None and owned._bg_durable is None and owned._conn is None
