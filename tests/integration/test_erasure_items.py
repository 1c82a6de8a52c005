"""Erasure of one item and of one subject (ADR 0075, 0076), on both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from engram.domain.conversation import Conversation
from engram.domain.erasure import ErasedContent, Erasure
from engram.domain.errors import InvalidInput
from engram.domain.ids import conversation_id_for
from engram.projections import engine
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput, MessageInput, NoteInput
from engram.services.config import Settings
from engram.services.erasure_items import NotYours
from engram.services.errors import Conflict, NotFound
from engram.services.fact_listing import list_facts
from tests.integration.test_erasure import _files_with, _pg_dump
from tests.patrol_support import scene
from tests.support import SeededIds, SteppingClock

CANARY = "qzjitemcanaryxv"  # one token: a full-text index keeps it whole
USER_CANARY = "vwksubjcanaryqj"
SECOND_CANARY = "kqzbackcanaryjw"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _plant(engram: Engram) -> dict[str, str]:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    note = engram.notes.take(
        "Aria", NoteInput(text=scene(f"Walked to the {CANARY} lake", actors=["me", "Lena"]))
    )
    kept = engram.notes.take("Aria", NoteInput(kind="todo", text="water the garden"))
    bo = engram.notes.take("Bo", NoteInput(kind="todo", text="feed the cat"))
    said = engram.messages.take(
        "Aria", MessageInput(id="m1", user="mina", text=f"my {USER_CANARY} secret", at=T0)
    )
    engram.messages.take(
        "Aria",
        MessageInput(
            id="m2", user="mina", role="assistant", text=f"I keep {USER_CANARY}", at=T0 + timedelta(seconds=5)
        ),
    )
    other = engram.messages.take("Aria", MessageInput(id="m3", user="olaf", text="olaf says hi", at=T0))
    fact = engram.facts.state("Aria", FactInput(subject="mina", text=f"Mina hides the {USER_CANARY} box"))
    engram.patrol("Aria")  # the scene becomes a node with a vector
    engram.views.catch_up_or_rebuild()
    return {
        "note": note.note_id,
        "kept": kept.note_id,
        "bo": bo.note_id,
        "message": said.message_id,
        "other": other.message_id,
        "fact": fact.fact_id,
    }


def _erased_ids(engram: Engram) -> set[UUID]:
    return {
        e.originator_id for _, e in engram.store.decoded_events(1, 10_000) if isinstance(e, ErasedContent)
    }


def test_forget_note_erases_it_and_what_was_made_from_it(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        ids = _plant(engram)
        engram.journals.refresh("Aria")
        data = settings.data_dir
        if backend == "postgres":
            assert CANARY.encode() in _pg_dump(settings).lower()  # the views on PostgreSQL hold it
        else:
            assert _files_with(data, CANARY.encode()), "the canary is in the views before forgetting"
        assert any(CANARY in n.model_dump_json() for n in engram.listing.nodes("Aria"))
        done = engram.item_forgetting.forget_item("note", ids["note"], by="admin")
        assert not done.already and done.scope == "note" and done.counts["keys"] == 2  # the note and its node
        assert done.counts["events"] >= 3
        erased = _erased_ids(engram)
        assert UUID(ids["note"]) in erased  # history shows the events existed, content erased
        texts = [n.text for n in engram.listing.notes("Aria")]
        assert texts == ["water the garden"]  # the other note is untouched
        assert not any(CANARY in n.model_dump_json() for n in engram.listing.nodes("Aria"))
        assert [n.text for n in engram.listing.notes("Bo")] == ["feed the cat"]
        engram.views.rebuild_all()  # a full rebuild shows it nowhere either, and works
        assert [n.text for n in engram.listing.notes("Aria")] == ["water the garden"]
        receipts = [e for _, e in engram.store.decoded_events(1, 10_000) if isinstance(e, Erasure.Erased)]
        assert [(r.scope, r.target) for r in receipts] == [("note", ids["note"])]
        again = engram.item_forgetting.forget_item("note", ids["note"], by="admin")
        assert again.already and "already forgotten" in again.message
    finally:
        engram.close()
    assert _files_with(data, CANARY.encode()) == []
    assert _files_with(data, USER_CANARY.encode())  # the user's words were not this note's
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump and CANARY.encode() not in dump.lower()


def test_forget_subject_erases_the_users_words_and_keeps_the_others(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        ids = _plant(engram)
        engram.journals.refresh("Aria")
        data = settings.data_dir
        assert _files_with(data, USER_CANARY.encode())
        if backend == "postgres":
            assert USER_CANARY.encode() in _pg_dump(settings).lower()
        done = engram.item_forgetting.forget_subject("Aria", "mina", by="admin")
        assert not done.already and done.scope == "subject"
        # two messages, the fact, the conversation: four keys at least
        assert done.counts["keys"] >= 4 and done.counts["journal_files"] >= 1
        erased = _erased_ids(engram)
        assert {UUID(ids["message"]), UUID(ids["fact"])} <= erased
        assert UUID(ids["other"]) not in erased
        assert list_facts(engram.store, engram.views, "Aria") == []
        assert [s.user for s in engram.sessions.list("Aria").sessions] == ["olaf"]
        assert [n.text for n in engram.listing.notes("Aria") if "garden" in n.text] == ["water the garden"]
        receipts = [e for _, e in engram.store.decoded_events(1, 10_000) if isinstance(e, Erasure.Erased)]
        assert [r.scope for r in receipts] == ["subject"] and "mina" not in receipts[0].target
        assert engram.item_forgetting.forget_subject("Aria", "mina", by="admin").already
        with pytest.raises(NotFound, match="forgotten"):
            engram.item_forgetting.forget_item("message", ids["message"], by="admin")
    finally:
        engram.close()
    assert _files_with(data, USER_CANARY.encode()) == []
    assert _files_with(data, b"olaf says hi")  # the other user's words are kept
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump and USER_CANARY.encode() not in dump.lower()


def _said(engram: Engram, user: str) -> list[str]:
    """The texts of the being's messages from `user`, as the conversations view holds them."""
    views = engram.views
    db = views.dbs["conversations"]
    with db.read() as conn:
        table = engine.read_tables(conn, db, views.projections["conversations"])["messages"]
        rows = conn.query(f"SELECT text FROM {table} WHERE user_id = ? ORDER BY at, id", [user])
    return [str(r["text"]) for r in rows]


def test_a_forgotten_user_comes_back_afresh(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    """ADR 0089: after `forget subject`, the same user's new messages start a new conversation (the
    next epoch) under a new key; a retried delivery of an erased message is refused; forgetting the
    user again erases the new words too, and the old ones stay gone."""
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        ids = _plant(engram)
        first = engram.item_forgetting.forget_subject("Aria", "mina", by="admin")
        back = engram.messages.take(
            "Aria", MessageInput(id="m10", user="mina", text=f"hello again {SECOND_CANARY}", at=T0)
        )
        assert not back.duplicate and back.conversation_id != str(conversation_id_for(first.being_id, "mina"))
        assert back.conversation_id == str(conversation_id_for(first.being_id, "mina", 1))
        engram.views.catch_up_or_rebuild()
        assert _said(engram, "mina") == [f"hello again {SECOND_CANARY}"]  # readable; the old words gone
        assert "mina" in [s.user for s in engram.sessions.list("Aria").sessions]
        with pytest.raises(Conflict, match="forgotten"):  # a retried delivery of an erased message
            engram.messages.take(
                "Aria", MessageInput(id="m1", user="mina", text=f"my {USER_CANARY} secret", at=T0)
            )
        batch = engram.messages.take_many(
            "Aria",
            [
                MessageInput(id="m1", user="mina", text=f"my {USER_CANARY} secret", at=T0),
                MessageInput(id="m11", user="mina", text="and once more", at=T0 + timedelta(seconds=9)),
            ],
            skip_refused=True,
        )
        assert [r["index"] for r in batch.refused] == [0] and len(batch.messages) == 1
        engram.views.catch_up_or_rebuild()
        assert USER_CANARY not in str(_said(engram, "mina"))

        again = engram.item_forgetting.forget_subject("Aria", "mina", by="admin")
        assert not again.already and again.erasure_id != first.erasure_id
        assert again.counts["keys"] >= 3  # the two new messages and the new conversation
        assert UUID(back.message_id) in _erased_ids(engram) and UUID(ids["other"]) not in _erased_ids(engram)
        engram.views.catch_up_or_rebuild()
        assert _said(engram, "mina") == [] and _said(engram, "olaf") == ["olaf says hi"]
        assert engram.item_forgetting.forget_subject("Aria", "mina", by="admin").already
        third = engram.messages.take("Aria", MessageInput(id="m12", user="mina", text="third time", at=T0))
        assert third.conversation_id == str(conversation_id_for(first.being_id, "mina", 2))
    finally:
        engram.close()
    data = settings.data_dir
    assert _files_with(data, USER_CANARY.encode()) == [] and _files_with(data, SECOND_CANARY.encode()) == []
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump and SECOND_CANARY.encode() not in dump.lower()


def test_forget_item_bad_input(engram: Engram) -> None:
    ids = _plant(engram)
    with pytest.raises(InvalidInput, match="not a note id"):
        engram.item_forgetting.forget_item("note", "nope", by="admin")
    with pytest.raises(NotFound, match="no note"):
        engram.item_forgetting.forget_item("note", str(uuid4()), by="admin")
    with pytest.raises(NotFound, match="no note"):  # a message is not a note
        engram.item_forgetting.forget_item("note", ids["message"], by="admin")
    bo = engram.beings.register("Cy")
    assert bo
    aria = engram.forgetting._being_id("Aria")
    with pytest.raises(NotYours):  # a being's token reaches only its own items
        engram.item_forgetting.forget_item("note", ids["bo"], by="token", being=aria)
    with pytest.raises(NotFound, match="nothing of a user"):
        engram.item_forgetting.forget_subject("Aria", "nobody", by="admin")
    with pytest.raises(InvalidInput):
        engram.item_forgetting.forget_subject("Aria", " ", by="admin")
    assert _erased_ids(engram) == set()  # nothing was erased by any of these


def test_forget_message_and_fact_and_the_being_after(engram: Engram) -> None:
    ids = _plant(engram)
    done = engram.item_forgetting.forget_item("message", ids["message"], by="admin")
    assert done.scope == "message" and not done.already
    assert engram.item_forgetting.forget_item("fact", ids["fact"], by="admin").counts["events"] >= 1
    assert list_facts(engram.store, engram.views, "Aria") == []
    gone = engram.forgetting.forget_being("Aria", by="admin")  # the being's remaining keys go too
    erased = _erased_ids(engram)
    assert {UUID(ids["kept"]), UUID(ids["other"]), UUID(ids["note"])} <= erased
    assert UUID(ids["bo"]) not in erased and gone.counts["events"] >= 6
    assert engram.store.app.keys.owned_keys(engram.forgetting._being_id("Aria")) == []  # type: ignore[attr-defined]


def test_an_item_is_named_by_the_callers_own_id_within_its_being(engram: Engram) -> None:
    """A caller knows the id it gave a message and the idempotency key it gave a note; with the being
    named, `forget` takes those, and only that being's item. Engram's own id still wins."""
    ids = _plant(engram)
    aria, bo = engram.forgetting._being_id("Aria"), engram.forgetting._being_id("Bo")
    keyed = engram.notes.take(
        "Aria", NoteInput(kind="todo", text=f"the {CANARY} plan", idempotency_key="k-1")
    )
    uuid_key = str(uuid4())  # a caller whose own message ids look like UUIDs
    said = engram.messages.take("Aria", MessageInput(id=uuid_key, user="olaf", text="olaf again", at=T0))
    with pytest.raises(InvalidInput, match="your own id"):  # no being: only Engram's ids
        engram.item_forgetting.forget_item("message", "m1", by="admin")
    with pytest.raises(NotFound, match="no message"):  # another being has no message m1
        engram.item_forgetting.forget_item("message", "m1", by="token", being=bo)
    with pytest.raises(InvalidInput, match="not a fact id"):  # facts have no caller's id
        engram.item_forgetting.forget_item("fact", "f1", by="admin", being=aria)
    assert _erased_ids(engram) == set()
    done = engram.item_forgetting.forget_item("message", "m1", by="token", being=aria)
    assert done.scope == "message" and UUID(ids["message"]) in _erased_ids(engram)
    assert engram.item_forgetting.forget_item("message", "m1", by="token", being=aria).already
    assert engram.item_forgetting.forget_item("note", "k-1", by="token", being=aria).scope == "note"
    assert UUID(keyed.note_id) in _erased_ids(engram)
    engram.item_forgetting.forget_item("message", uuid_key, by="token", being=aria)
    assert UUID(said.message_id) in _erased_ids(engram)
    # Engram's id of another item, given with the being: that item, not a caller's id of that text.
    engram.item_forgetting.forget_item("message", ids["other"], by="token", being=aria)
    assert UUID(ids["other"]) in _erased_ids(engram)


def test_the_keys_of_an_export_keep_their_tags(engram: Engram, tmp_path: Path) -> None:
    from engram.adapters.key_files import LocalKeyStore

    ids = _plant(engram)
    keys = engram.store.app.keys  # type: ignore[attr-defined]
    aria = engram.forgetting._being_id("Aria")
    exported = keys.export_keys(aria)
    # Item keys are named by their slot (the sealed header names it), the key id in the value.
    assert aria.hex in exported and any(f":{UUID(ids['note']).hex}:" in v for v in exported.values())
    target = LocalKeyStore(tmp_path / "keys.json")
    assert target.import_keys(exported) == len(exported)
    assert set(target.owned_keys(aria, subject="mina")) == set(keys.owned_keys(aria, subject="mina"))
    assert target.owned.get(UUID(ids["note"])) == keys.owned.get(UUID(ids["note"])) is not None


def test_the_cli_forgets_an_item_and_a_subject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from engram.adapters.cli.main import cli

    runner = CliRunner()
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
    taken = runner.invoke(
        cli, ["note", "Aria", "--kind", "todo", "--json", "--text", f"water the {CANARY} garden"]
    )
    assert taken.exit_code == 0, taken.output
    note_id = json.loads(taken.output)["note_id"]
    said = runner.invoke(
        cli, ["message", "Aria", "--user", "mina", "--id", "m1", "--text", f"my {USER_CANARY} secret"]
    )
    assert said.exit_code == 0, said.output
    refused = runner.invoke(cli, ["forget", "note", note_id])  # not a terminal, no --yes
    assert refused.exit_code == 4 and "--yes" in refused.output
    assert runner.invoke(cli, ["forget", "note", str(uuid4()), "--yes"]).exit_code == 3
    assert runner.invoke(cli, ["forget", "note", "nope", "--yes"]).exit_code == 2
    done = runner.invoke(cli, ["forget", "note", note_id, "--yes"])
    assert done.exit_code == 0 and "forgotten" in done.output and "receipt" in done.output, done.output
    again = runner.invoke(cli, ["forget", "note", note_id, "--yes"])
    assert again.exit_code == 0 and "already forgotten" in again.output
    by_own_id = runner.invoke(cli, ["forget", "message", "m1", "--being", "Aria", "--yes", "--json"])
    assert by_own_id.exit_code == 0 and json.loads(by_own_id.output)["scope"] == "message", by_own_id.output
    assert runner.invoke(cli, ["forget", "message", "m1", "--being", "Nobody", "--yes"]).exit_code == 3
    gone = runner.invoke(cli, ["forget", "subject", "Aria", "--user", "mina", "--yes", "--json"])
    assert gone.exit_code == 0 and json.loads(gone.output)["scope"] == "subject", gone.output
    assert runner.invoke(cli, ["forget", "subject", "Aria", "--user", "nobody", "--yes"]).exit_code == 3
    assert _files_with(tmp_path / "data", CANARY.encode()) == []
    assert _files_with(tmp_path / "data", USER_CANARY.encode()) == []


MESSAGE_CANARY = "zqxlastmsgcanaryk"


def _summary_texts(engram: Engram, being_id: UUID, user: str) -> dict[str, list[str]]:
    """Each summary kind's contents for `user`'s conversation, as the view holds them."""
    views = engram.views
    db = views.dbs["conversations"]
    with db.read() as conn:
        tables = engine.read_tables(conn, db, views.projections["conversations"])
        rows = conn.query(
            f"SELECT kind, content FROM {tables['conversation_summaries']} "
            "WHERE being_id = ? AND user_id = ? ORDER BY position",
            [str(being_id), user],
        )
    out: dict[str, list[str]] = {"rolling": [], "session": [], "spine": []}
    for r in rows:
        if r["content"] is not None:
            out[str(r["kind"])].append(str(r["content"]))
    return out


def test_forgetting_a_message_takes_its_excerpt_and_the_summaries_quoting_it(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    """ADR 0093: the canary is the conversation's last user message and is quoted by an extractive
    rolling summary, session summary and spine; after `forget message` it is in no view, no file, no
    dump; the last user message is the previous one, the summaries are due again and written again
    from the remaining messages, and a rebuild gives the same rows."""
    from tests.integration.test_erasure_purge import _snapshot
    from tests.session_support import CHAT, chat

    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        being_id = UUID(engram.beings.register("Aria").being_id)
        more = [
            ("user", "Tomas and I dug the garden beds for the tomatoes today."),
            ("assistant", "The garden beds sound ready for the tomatoes."),
            ("user", "The hospital gave me Saturday off for the garden."),
            ("assistant", "A free Saturday in the garden with Tomas, lovely."),
            ("user", "Tomas will bring the tomato seeds and the beans."),
            ("assistant", "Tomatoes and beans from Tomas: a good garden start."),
            ("user", f"I need to renew the garden {MESSAGE_CANARY} licence with Tomas at the hospital."),
            ("assistant", "I'll remind you about that licence."),
        ]
        taken = chat(engram, "Aria", "lena", [*CHAT, *more], start=T0)
        canary_id = taken[-2].message_id
        chat(engram, "Aria", "olaf", [("user", "olaf needs to water the garden plants.")], prefix="o")
        engram.views.ensure()
        engram.summaries.run_due("Aria")  # the open session's rolling summary and the spine
        engram.summaries.close_idle(clock.current + timedelta(hours=2))
        engram.summaries.run_due("Aria")  # the closed session's summary
        engram.views.catch_up_or_rebuild()
        state = engram.sessions.list("Aria", user="lena").state
        assert state is not None
        assert state.last_user_message is not None and MESSAGE_CANARY in state.last_user_message
        before = _summary_texts(engram, being_id, "lena")
        assert before["rolling"] and before["session"] and before["spine"]
        for kind in ("rolling", "session", "spine"):  # each kind quotes it: the test can fail
            assert MESSAGE_CANARY in before[kind][-1], kind
        engram.journals.refresh("Aria")
        found = _files_with(settings.data_dir, MESSAGE_CANARY.encode())
        assert any("journal" in str(f) or f.endswith(".md") for f in map(str, found)), found
        if backend == "postgres":
            assert MESSAGE_CANARY.encode() in _pg_dump(settings).lower()

        conversation_id = UUID(taken[0].conversation_id)
        stale = engram.store.get(Conversation, conversation_id)  # as another process may hold it
        assert not stale.sessions_due and not stale.spine_due
        done = engram.item_forgetting.forget_item("message", canary_id, by="admin")
        # the message and the three summaries covering it (the rolling, the session's, the spine)
        assert done.counts["keys"] == 4 and done.counts["events"] == 4, done.counts
        for e in engram.store.events(conversation_id):  # what that process reads next
            if e.originator_version > stale.version:
                stale = e.mutate(stale)
        fresh = engram.store.get(Conversation, conversation_id)
        assert stale.sessions_due and stale.spine_due and fresh.version == stale.version
        counters = ("unsummarized", "spine_upto", "spine_version", "rolling_versions", "refused")
        assert [getattr(stale, n) for n in counters] == [getattr(fresh, n) for n in counters]
        engram.views.catch_up_or_rebuild()
        recomputed = _snapshot(engram)  # the conversation's rows recomputed in place (ADR 0093)
        engram.views.rebuild_all()
        assert [t for t, rows in _snapshot(engram).items() if recomputed[t] != rows] == []
        state = engram.sessions.list("Aria", user="lena").state
        assert state is not None
        assert state.last_user_message == "Tomas will bring the tomato seeds and the beans."
        after = _summary_texts(engram, being_id, "lena")
        assert MESSAGE_CANARY not in str(after) and after["rolling"] == before["rolling"][:-1]
        assert after["session"] == [] and after["spine"] == []
        assert state.message_count == 20  # the conversation still counts that a message was heard
        again = engram.summaries.run_due("Aria")  # due again: written from the remaining messages
        assert (again.sessions, again.spines) == (1, 1)
        engram.views.catch_up_or_rebuild()
        rewritten = _summary_texts(engram, being_id, "lena")
        assert len(rewritten["session"]) == len(rewritten["spine"]) == 1
        assert MESSAGE_CANARY not in str(rewritten) and "Tomas" in rewritten["session"][0]
        purged = _snapshot(engram)
        engram.views.rebuild_all()
        rebuilt = _snapshot(engram)
        assert [t for t in rebuilt if purged[t] != rebuilt[t]] == []  # table by table, row by row
        assert MESSAGE_CANARY not in str(rebuilt)
        engram.journals.refresh("Aria")
    finally:
        engram.close()
    assert _files_with(settings.data_dir, MESSAGE_CANARY.encode()) == []
    assert _files_with(settings.data_dir, b"olaf needs to water")  # the other user's words are kept
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump and MESSAGE_CANARY.encode() not in dump.lower()


def test_an_open_sessions_rolling_summary_is_written_again_at_once_without_the_forgotten_message(
    engram: Engram,
) -> None:
    from tests.session_support import CHAT, chat

    being_id = UUID(engram.beings.register("Aria").being_id)
    lines = [
        *CHAT[:2],
        ("user", f"Hospital night shifts, Tomas, garden: {MESSAGE_CANARY} hospital garden."),
        CHAT[3],
    ]
    taken = chat(engram, "Aria", "lena", lines)  # one open session of 4 turns
    engram.views.ensure()
    assert engram.summaries.run_due("Aria").rolling == 1
    engram.views.catch_up_or_rebuild()
    [before] = _summary_texts(engram, being_id, "lena")["rolling"]
    assert MESSAGE_CANARY in before
    engram.item_forgetting.forget_item("message", taken[2].message_id, by="admin")
    engram.views.catch_up_or_rebuild()
    assert _summary_texts(engram, being_id, "lena")["rolling"] == []
    again = engram.summaries.run_due("Aria")  # due again, and written at once: the view is caught up
    assert again.rolling == 1
    engram.views.catch_up_or_rebuild()
    [after] = _summary_texts(engram, being_id, "lena")["rolling"]
    assert MESSAGE_CANARY not in after and after
    session = engram.sessions.list("Aria", user="lena").sessions[0]
    assert session.turns == 4  # 3 messages left of 4 heard: written again without waiting for a 4th
