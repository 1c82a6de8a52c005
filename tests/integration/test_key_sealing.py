"""`engram keys seal` (ADR 0095): a log written before encryption (ADR 0074) or before item keys
(ADR 0075) rewritten into the form a new write gives it, so that `forget` erases its old data; the
hash chain stays verifiable, and the old plaintext leaves the files. Both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from engram.adapters.eventstore import chain_check
from engram.adapters.eventstore.key_choice import KeyChoice
from engram.adapters.eventstore.shredding import MAGIC, MAGIC_ITEM
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput, NoteInput
from engram.services.config import Settings
from engram.services.errors import Conflict
from tests.integration.test_erasure import CANARY, T0
from tests.support import SeededIds, SteppingClock

USER_CANARY = "vbnusercanaryq"
SCENE_CANARY = "kjhscenecanaryw"


@contextmanager
def _old_log(
    settings: Settings, clock: SteppingClock, monkeypatch: pytest.MonkeyPatch, *, clear: bool
) -> Iterator[Engram]:
    """A deployment as an older version wrote it: in clear (before ADR 0073), or every event of a
    being under the being's key (before ADR 0075)."""
    import engram.adapters.eventstore as eventstore
    import engram.adapters.eventstore.shredding as shredding

    with monkeypatch.context() as m:
        if clear:
            plain = eventstore.open_event_log
            m.setattr(eventstore, "open_event_log", lambda d, u, keys=None: plain(d, u))
        else:
            m.setattr(shredding, "choose_key", lambda topic, oid, being, state: KeyChoice(being, being))
        with bootstrap(settings, clock=clock, ids=SeededIds()) as old:
            yield old


def _plant_old(old: Engram) -> UUID:
    old.beings.register("Aria")
    note = old.notes.take("Aria", NoteInput(kind="todo", text=f"water the {CANARY} garden"))
    old.notes.take("Aria", NoteInput(kind="todo", text="feed the cat"))
    old.messages.take("Aria", MessageInput(id="m1", user="mina", text="hello there", at=T0))
    return UUID(note.note_id)


def _states(engram: Engram) -> list[bytes]:
    return [bytes(n.state) for n in engram.store.notifications(1, 10_000)]


def _files_with(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("clear", [True, False], ids=["in-clear", "being-key"])
def test_seal_makes_old_notes_erasable(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    clear: bool,
) -> None:
    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=clear) as old:
        note_id = _plant_old(old)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        with pytest.raises(Conflict):
            engram.item_forgetting.forget_item("note", str(note_id), by="admin")
        before = {n.text for n in engram.listing.notes("Aria")}
        dry = engram.key_sealing.seal("Aria", by="admin", dry_run=True)
        assert not dry.nothing_to_seal and dry.counts["events"] >= 3
        assert (dry.counts["in_clear"] > 0) is clear and (dry.counts["from_being_key"] > 0) is not clear
        done = engram.key_sealing.seal("Aria", by="admin")
        assert done.counts["events"] == dry.counts["events"] and done.position is not None
        assert chain_check.verify(engram.store.app).ok
        assert not any(CANARY.encode() in s for s in _states(engram))
        assert {n.text for n in engram.listing.notes("Aria")} == before  # reads the same
        again = engram.key_sealing.seal("Aria", by="admin")
        assert again.nothing_to_seal and again.position is None
        note_states = [bytes(e.state) for e in engram.store.app.recorder.select_events(note_id)]
        assert note_states and all(s[:4] == MAGIC_ITEM and s[4:20] == note_id.bytes for s in note_states)
        engram.item_forgetting.forget_item("note", str(note_id), by="admin")
        assert {n.text for n in engram.listing.notes("Aria")} == {"feed the cat"}
        gone = engram.item_forgetting.forget_subject("Aria", "mina", by="admin")  # old messages too
        assert not gone.already and gone.counts["events"] >= 1
        assert chain_check.verify(engram.store.app).ok
    _no_canary_in_files(settings, backend)


def _no_canary_in_files(settings: Settings, backend: str, canary: str = CANARY) -> None:
    """SQLite: no file of the data dir (databases, WAL, journals, keys); PostgreSQL: no file of the
    schema's tables, indexes and TOAST after a CHECKPOINT (dead tuples included)."""
    assert _files_with(settings.data_dir, canary.encode()) == []
    if backend == "postgres":
        from tests.integration.test_erasure_pg_files import _holding, _table_files

        files = _table_files(settings)
        assert files and _holding(files, canary.encode()) == []


def test_seal_then_forget_being_of_a_log_in_clear(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
        old.notes.take("Aria", NoteInput(kind="todo", text=f"another {CANARY}"))
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        with pytest.raises(Conflict, match="in clear"):
            engram.forgetting.forget_being("Aria", by="admin")
        engram.key_sealing.seal(None, by="admin")
        assert not [s for s in _states(engram) if s[:4] not in (MAGIC, MAGIC_ITEM) and CANARY.encode() in s]
        engram.forgetting.forget_being("Aria", by="admin")
        assert chain_check.verify(engram.store.app).ok
    _no_canary_in_files(settings, backend)


def test_an_edited_byte_is_still_caught_after_a_seal(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.test_log_chain import _change_one_byte

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        done = engram.key_sealing.seal(None, by="admin")
        assert done.first_position is not None
        assert chain_check.verify(engram.store.app).ok
        _change_one_byte(engram, done.first_position)
        verdict = chain_check.verify(engram.store.app)
        assert not verdict.ok and verdict.broken_at == done.first_position


def test_a_checkpoint_older_than_a_seal_is_answered_from_the_hashes_it_replaced(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=False) as old:
        _plant_old(old)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        app = engram.store.app
        head = chain_check.verify(app)
        assert head.ok
        done = engram.key_sealing.seal(None, by="token:t1")
        assert done.old_head_position == head.head_position and done.old_head_hash == head.head_hash
        assert chain_check.stored_hashes(app, [head.head_position])[head.head_position] != head.head_hash
        answer = engram.key_sealing.checkpoint_before_seal(head.head_position, head.head_hash)
        assert answer is not None and answer["matched_before_seal"] and answer["sealed_by"] == "token:t1"
        assert answer["receipt_id"] == str(done.receipt_id)
        forged = engram.key_sealing.checkpoint_before_seal(head.head_position, "00" * 32)
        assert forged is not None and not forged["matched_before_seal"]
        # Below the first rewritten position the chain did not change: no seal to tell of.
        assert done.first_position is not None and done.first_position > 1
        assert engram.key_sealing.checkpoint_before_seal(done.first_position - 1, head.head_hash) is None


def test_a_seal_killed_between_batches_leaves_a_log_that_verifies_and_resumes(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engram.adapters.eventstore.resealing as resealing

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
        for n in range(6):
            old.notes.take("Aria", NoteInput(kind="todo", text=f"old note {n}"))
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        app = engram.store.app
        before = chain_check.verify(app)
        expected = engram.key_sealing.seal("Aria", by="admin", dry_run=True).counts["events"]
        monkeypatch.setattr(resealing, "BATCH", 3)
        real = resealing.LogResealing._rewrite
        calls = {"n": 0}

        def killed(self: Any, tx: Any, plans: Any, scope: str) -> Any:
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt  # the process killed in its third batch: that one rolls back
            return real(self, tx, plans, scope)

        monkeypatch.setattr(resealing.LogResealing, "_rewrite", killed)
        with pytest.raises(KeyboardInterrupt):
            engram.key_sealing.seal("Aria", by="admin")
        assert chain_check.verify(app).ok  # a kill between batches leaves an intact chain
        pending = engram.key_sealing.resealer.pending()
        assert pending is not None and 0 < pending.counts["in_clear"] < expected
        monkeypatch.setattr(resealing.LogResealing, "_rewrite", real)
        done = engram.key_sealing.seal("Aria", by="admin")
        assert done.counts["events"] == expected and done.old_head_hash == before.head_hash
        assert engram.key_sealing.resealer.pending() is None
        assert chain_check.verify(app).ok
        assert engram.key_sealing.seal("Aria", by="admin").nothing_to_seal


def test_the_cli_seals_asks_first_and_verify_explains_an_older_checkpoint(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
) -> None:
    import json

    from click.testing import CliRunner

    from engram.adapters.cli.main import cli

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))
    if settings.database_url is not None:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", settings.database_url.get_secret_value())
    runner = CliRunner()
    checkpoint = tmp_path / "checkpoint.json"
    assert runner.invoke(cli, ["verify", "--checkpoint-out", str(checkpoint)]).exit_code == 0
    refused = runner.invoke(cli, ["keys", "seal"])  # not a terminal, no --yes
    assert refused.exit_code == 4 and "--yes" in refused.output
    dry = runner.invoke(cli, ["keys", "seal", "Aria", "--dry-run", "--json"])
    assert dry.exit_code == 0 and json.loads(dry.output)["counts"]["in_clear"] >= 3, dry.output
    done = runner.invoke(cli, ["keys", "seal", "--yes", "--by", "ops"])
    assert done.exit_code == 0 and "events sealed" in done.output and "receipt" in done.output, done.output
    checked = runner.invoke(cli, ["verify", "--against", str(checkpoint)])
    assert checked.exit_code == 7, checked.output  # not broken, not a plain match: a declared rewrite
    assert "resealed" in checked.output and "by ops" in checked.output and "BROKEN" not in checked.output
    again = runner.invoke(cli, ["keys", "seal", "--yes"])
    assert again.exit_code == 0 and "nothing to seal" in again.output
    assert runner.invoke(cli, ["verify"]).exit_code == 0
    forged = json.loads(checkpoint.read_text()) | {"hash": "00" * 32}
    checkpoint.write_text(json.dumps(forged))
    wrong = runner.invoke(cli, ["verify", "--against", str(checkpoint)])
    assert wrong.exit_code == 6 and "DOES NOT match" in wrong.output, wrong.output


def test_other_deployments_keep_writing_and_reading_while_a_seal_runs(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's worth of Engram (its own connections) writes new notes, and a later event
    of an old note, while the seal rewrites batch by batch: one intact chain, every note readable."""
    import threading

    import engram.adapters.eventstore.resealing as resealing

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        note_id = _plant_old(old)
        for n in range(12):
            old.notes.take("Aria", NoteInput(kind="todo", text=f"old note {n}"))
    monkeypatch.setattr(resealing, "BATCH", 2)  # many batches, so the writer lands between them
    sealer = bootstrap(settings, clock=clock, ids=SeededIds(1000))
    writer = bootstrap(settings, ids=SeededIds(5000))
    try:
        before = {n.text for n in writer.listing.notes("Aria")}  # read (and cached) before the seal
        started = threading.Event()

        def write() -> None:
            started.wait()
            for n in range(10):
                writer.notes.take("Aria", NoteInput(kind="todo", text=f"new note {n}"))

        thread = threading.Thread(target=write)
        thread.start()
        started.set()
        done = sealer.key_sealing.seal("Aria", by="admin")
        thread.join()
        assert done.counts["in_clear"] >= 14
        # A later event of an old note, written by the other deployment after the seal: under the
        # note's new key (found from its first event's header), so forgetting the note still holds.
        newer = writer.notes.take("Aria", NoteInput(kind="todo", text="water the roses"))
        writer.note_lifecycle.supersede("Aria", note_id, newer.note_id)
        assert {k for k in sealer.forgetting.storage.keys_of(note_id)} == {note_id}
        assert chain_check.verify(sealer.store.app).ok
        sealer.views.catch_up_or_rebuild()
        texts = {n.text for n in sealer.listing.notes("Aria")}
        assert before - {f"water the {CANARY} garden"} <= texts
        assert {f"new note {n}" for n in range(10)} <= texts
        assert {n.text for n in writer.listing.notes("Aria")} >= {f"old note {n}" for n in range(12)}
        assert sealer.key_sealing.seal("Aria", by="admin").nothing_to_seal
    finally:
        writer.close()
        sealer.close()


def test_snapshots_written_in_clear_are_dropped_and_the_conversation_reads_the_same(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """A conversation is snapshotted every 100 events: an old log's snapshot quotes the user in clear.
    The seal drops it (a cache), and the user can then be forgotten."""
    from engram.domain.ids import conversation_id_for

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
        lines = [
            MessageInput(
                id=f"s{n}", user="mina", text=f"{USER_CANARY} line {n}", at=T0.replace(minute=n % 60)
            )
            for n in range(110)
        ]
        old.messages.take_many("Aria", lines)
        being_id = old.forgetting._being_id("Aria")
    conversation = conversation_id_for(being_id, "mina")
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        snapshots = engram.store.app.snapshots
        assert snapshots is not None
        held = [bytes(s.state) for s in snapshots.recorder.select_events(conversation)]
        if not held:  # the library snapshots as events are saved: one save of 110 may not cross 100
            old_conversation = engram.store.app.repository.get(conversation)
            engram.store.app.take_snapshot(conversation, version=old_conversation.version)
            held = [bytes(s.state) for s in snapshots.recorder.select_events(conversation)]
        assert held and all(s[:4] not in (MAGIC, MAGIC_ITEM) for s in held)  # in clear
        before = engram.store.app.repository.get(conversation)
        done = engram.key_sealing.seal("Aria", by="admin")
        assert done.counts["snapshots_dropped"] >= 1
        assert [
            s for s in snapshots.recorder.select_events(conversation) if bytes(s.state)[:4] != MAGIC_ITEM
        ] == []
        engram.store.cache.clear()
        after = engram.store.app.repository.get(conversation)
        assert after.version == before.version and vars(after) == vars(before)
        engram.views.catch_up_or_rebuild()
        if backend == "sqlite":  # the views held the user's words (PostgreSQL: in its table files)
            assert _files_with(settings.data_dir, USER_CANARY.encode())
        engram.item_forgetting.forget_subject("Aria", "mina", by="admin")
    _no_canary_in_files(settings, backend, USER_CANARY)


def test_a_node_made_from_an_old_note_is_erased_with_it_after_a_seal(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """A scene note's node (its scene quotes the note) gets a key of its own tagged with the note, as a
    new write would: forgetting the old note then erases the node too, its vector and view rows."""
    from tests.patrol_support import scene

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
        taken = old.notes.take(
            "Aria", NoteInput(text=scene(f"Walked to the {SCENE_CANARY} lake", actors=["me", "Lena"]))
        )
        old.patrol("Aria")  # the scene becomes a node with a vector
        old.views.catch_up_or_rebuild()
        assert old.listing.nodes("Aria")
    scene_note = UUID(taken.note_id)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        engram.key_sealing.seal("Aria", by="admin")
        nodes = [n for n in engram.listing.nodes("Aria")]
        assert nodes
        node_id = UUID(str(nodes[0].id))
        node_states = [bytes(e.state) for e in engram.store.app.recorder.select_events(node_id)]
        assert node_states and all(s[:4] == MAGIC_ITEM and s[4:20] == node_id.bytes for s in node_states)
        gone = engram.item_forgetting.forget_item("note", str(scene_note), by="admin")
        assert gone.counts["keys"] >= 2  # the note's key and its node's
        assert engram.listing.nodes("Aria") == []
        assert chain_check.verify(engram.store.app).ok
    _no_canary_in_files(settings, backend, SCENE_CANARY)


def test_a_scrub_cut_short_is_finished_by_the_next_run(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """The receipt is written before the files are scrubbed; a file another process held stays listed
    as pending, and the next run scrubs it (no second receipt) instead of answering "nothing to seal"."""
    if backend != "sqlite":
        pytest.skip("SQLite's files: a VACUUM refused while another process holds the file")
    import engram.adapters.eventstore.resealing as resealing

    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        real = resealing.vacuum_files
        monkeypatch.setattr(resealing, "vacuum_files", lambda paths, what, timeout=30: [])
        first = engram.key_sealing.seal("Aria", by="admin")
        assert first.position is not None and "run it again" in first.message
        assert engram.key_sealing.resealer.pending() is not None
        monkeypatch.setattr(resealing, "vacuum_files", real)
        second = engram.key_sealing.seal("Aria", by="admin")
        assert not second.nothing_to_seal and second.position is None  # the receipt was written before
        assert second.receipt_id == first.receipt_id and second.files_scrubbed
        assert engram.key_sealing.resealer.pending() is None
        assert engram.key_sealing.seal("Aria", by="admin").nothing_to_seal
