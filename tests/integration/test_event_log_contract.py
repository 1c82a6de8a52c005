"""The event-sourced core's contract, run on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import json
import multiprocessing as mp
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from engram.domain.embedding import Embedding
from engram.domain.errors import InvalidInput, InvalidScene, InvalidTransition, PayloadTooLarge
from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.errors import (
    ConcurrencyConflict,
    DuplicateBeing,
    IdempotencyConflict,
    NotFound,
    WriteRaced,
)
from engram.services.runner import CommandRunner

SCENE = {
    "action": "Planted tomatoes with Mina",
    "actors": ["me", "Mina"],
    "when": ["2026-05-02"],
    "feeling": "hopeful",
    "importance": 0.6,
    "themes": ["garden"],
}


def scene_note(**kw: object) -> NoteInput:
    return NoteInput(text=json.dumps({**SCENE, **kw.pop("scene", {})}), **kw)  # type: ignore[arg-type]


def test_register_resolve_and_refuse_duplicates(engram: Engram) -> None:
    r = engram.beings.register("Aria")
    assert r.position == engram.store.head() == 3  # the being and its two roots, one transaction
    from engram.services.beings import resolve_being

    assert resolve_being(engram.store, "Aria").id == UUID(r.being_id)
    assert resolve_being(engram.store, r.being_id).name == "Aria"
    with pytest.raises(DuplicateBeing):
        engram.beings.register(" Aria ")
    assert engram.store.head() == 3
    with pytest.raises(NotFound):
        resolve_being(engram.store, "Nobody")
    with pytest.raises(NotFound):  # a cluster id is not a being id
        resolve_being(engram.store, r.roots["Business"])


def test_notes_are_idempotent_by_key(engram: Engram) -> None:
    engram.beings.register("Aria")
    first = engram.notes.take("Aria", scene_note(idempotency_key="msg-1", source_ref="chat:42"))
    again = engram.notes.take("Aria", scene_note(idempotency_key="msg-1", source_ref="chat:42"))
    assert again.note_id == first.note_id and again.duplicate and again.position is None
    assert len(engram.audit.history("note", first.note_id)) == 1
    with pytest.raises(IdempotencyConflict):
        engram.notes.take("Aria", scene_note(idempotency_key="msg-1", scene={"feeling": "sad"}))
    # The same key under another being is another note.
    engram.beings.register("Bo")
    other = engram.notes.take("Bo", scene_note(idempotency_key="msg-1", source_ref="chat:42"))
    assert other.note_id != first.note_id


def _racer(settings_json: str, key: str, start: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    try:
        e = bootstrap(Settings.model_validate_json(settings_json))
    except Exception as exc:  # report, the parent asserts
        out.put(f"error: {exc!r}")
        return
    start.wait()
    try:
        out.put(e.notes.take("Aria", scene_note(idempotency_key=key)).note_id)
    except Exception as exc:
        out.put(f"error: {exc!r}")
    finally:
        e.close()


def test_idempotency_holds_when_processes_race(engram: Engram, make_settings) -> None:
    engram.beings.register("Aria")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    settings_json = make_settings().model_dump_json()
    settings_json = json.dumps(
        {
            **json.loads(settings_json),
            **(
                {"database_url": make_settings().database_url.get_secret_value()}
                if make_settings().database_url
                else {}
            ),
        }
    )
    procs = [ctx.Process(target=_racer, args=(settings_json, "race-key", start, out)) for _ in range(6)]
    for p in procs:
        p.start()
    start.set()
    ids = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len(set(ids)) == 1, ids
    assert not ids[0].startswith("error")
    assert len(engram.audit.history("note", ids[0])) == 1


def test_batch_is_all_or_nothing(engram: Engram) -> None:
    engram.beings.register("Aria")
    head = engram.store.head()
    batch = [scene_note(), scene_note(scene={"importance": 1.4}), scene_note()]
    with pytest.raises(InvalidScene) as info:
        engram.notes.take_many("Aria", batch)
    assert info.value.details["index"] == 1 and "importance" in info.value.message
    assert engram.store.head() == head
    done = engram.notes.take_many(
        "Aria",
        [
            scene_note(),
            NoteInput(text="free prose, kept for repair"),
            NoteInput(kind="todo", text="call the plumber"),
        ],
    )
    assert [n.parsed for n in done.notes] == [True, False, None]
    assert done.notes[1].parse_error and done.position == engram.store.head()


def test_oversized_and_unknown_inputs_are_refused_without_writes(engram: Engram) -> None:
    engram.beings.register("Aria")
    head = engram.store.head()
    with pytest.raises(PayloadTooLarge):
        engram.notes.take("Aria", NoteInput(kind="knowledge", text="x" * (64 * 1024 + 1)))
    with pytest.raises(NotFound):
        engram.notes.take("Nobody", scene_note())
    with pytest.raises(InvalidInput):
        engram.notes.take_many("Aria", [])
    assert engram.store.head() == head


def test_history_and_state_as_of_version_and_instant(engram: Engram, clock) -> None:
    engram.beings.register("Aria")
    note = engram.notes.take("Aria", NoteInput(kind="todo", text="renew passport"))
    note_id = UUID(note.note_id)
    engram.notes.mark_read("Aria", note_id)
    engram.notes.mark_read("Aria", note_id, read=False)
    history = engram.audit.history("note", note.note_id)
    assert [h["type"] for h in history] == ["Note.Noted", "Note.MarkedRead", "Note.MarkedUnread"]
    assert [h["version"] for h in history] == [1, 2, 3]
    assert engram.audit.state("note", note.note_id, version=2)["read"] is True
    assert engram.audit.state("note", note.note_id)["read"] is False
    from datetime import datetime

    second = datetime.fromisoformat(history[1]["timestamp"])
    assert engram.audit.state("note", note.note_id, as_of=second + timedelta(microseconds=1))["version"] == 2
    with pytest.raises(NotFound):
        engram.audit.state("note", note.note_id, as_of=second - timedelta(days=1))
    with pytest.raises(NotFound):
        engram.audit.state("note", note.note_id, version=9)
    with pytest.raises(NotFound):  # right id, wrong kind
        engram.audit.history("node", note.note_id)


def test_log_is_ordered_and_filterable_by_being(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    engram.notes.take("Bo", scene_note())
    engram.notes.take("Aria", scene_note())
    everything = engram.audit.log(limit=100)
    assert [e["position"] for e in everything] == list(range(1, len(everything) + 1))
    aria = engram.audit.log(being="Aria")
    from engram.services.beings import resolve_being

    assert {e["being_id"] for e in aria} == {str(resolve_being(engram.store, "Aria").id)}
    assert len(aria) == 4 and len(engram.audit.log(being="Bo", limit=2)) == 2
    assert engram.audit.log(after=everything[-2]["position"]) == everything[-1:]


def test_tenant_scoping_reads_another_beings_note_as_not_found(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    note = engram.notes.take("Aria", NoteInput(kind="todo", text="secret"))
    with pytest.raises(NotFound):
        engram.notes.mark_read("Bo", UUID(note.note_id))
    with pytest.raises(NotFound):
        engram.audit.history("note", note.note_id, being="Bo")
    assert engram.audit.history("note", note.note_id, being="Aria")


def _node(engram: Engram, being: str, dim: int) -> MemoryNode:
    from engram.services.beings import resolve_being

    b = resolve_being(engram.store, being)
    root = engram.store.get(
        __import__("engram.domain.cluster", fromlist=["Cluster"]).Cluster, b.business_root_id
    )
    node = MemoryNode.create(uuid4(), validate_scene_object(SCENE), root, b.cycle, engram.clock.now())
    node.embed(
        Embedding.from_floats("test-model", [((i * 7) % 13) / 13 - 0.5 for i in range(dim)]),
        engram.clock.now(),
    )
    engram.store.save(node)
    return node


@pytest.mark.parametrize("dim", [384, 1536])
def test_vectors_are_stored_as_compact_float32(engram: Engram, dim: int) -> None:
    engram.beings.register("Aria")
    node = _node(engram, "Aria", dim)
    stored = engram.store.notifications(engram.store.head(), 1)[0]
    assert stored.topic == "engram.MemoryNode.Embedded"
    # base64 of 4 bytes per float plus a small envelope, far below JSON floats (~20 bytes each)
    assert len(stored.state) < dim * 4 * 4 / 3 + 300
    loaded = engram.store.get(MemoryNode, node.id)
    assert loaded.embedding == node.embedding


def test_pin_and_unpin_through_the_service(engram: Engram) -> None:
    engram.beings.register("Aria")
    node = _node(engram, "Aria", 8)
    assert engram.nodes.pin("Aria", node.id).details["pinned"] is True
    assert engram.nodes.unpin("Aria", node.id).details["pinned"] is False
    engram.beings.register("Bo")
    with pytest.raises(NotFound):
        engram.nodes.pin("Bo", node.id)


def test_a_stale_writer_is_refused_and_the_runner_retries(engram: Engram, make_settings) -> None:
    engram.beings.register("Aria")
    note = engram.notes.take("Aria", NoteInput(kind="todo", text="x"))
    other = bootstrap(make_settings())
    try:
        stale = engram.store.get(Note, UUID(note.note_id))
        fresh = other.store.get(Note, UUID(note.note_id))
        fresh.mark_read(engram.clock.now())
        other.store.save(fresh)
        stale.mark_read(engram.clock.now())
        with pytest.raises(WriteRaced):
            engram.store.save(stale)
    finally:
        other.close()
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise WriteRaced()
        return "ok"

    assert CommandRunner(5).run("flaky", flaky) == "ok" and len(calls) == 3
    with pytest.raises(ConcurrencyConflict):
        CommandRunner(2).run("always", lambda: (_ for _ in ()).throw(WriteRaced()))


def test_beings_snapshot_and_replay_to_the_same_state(engram: Engram) -> None:
    engram.beings.register("Aria")
    from engram.services.beings import resolve_being

    for i in range(230):
        b = resolve_being(engram.store, "Aria")
        b.start_patrol_cycle(engram.clock.now())
        if i % 50 == 0:
            b.write_diary(f"2026-01-{1 + i // 50:02d}", f"day {i}", engram.clock.now())
        engram.store.save(b)
    being = resolve_being(engram.store, "Aria")
    assert being.cycle == 230 and being.diary["2026-01-05"] == "day 200"
    assert engram.store.app.snapshots is not None
    assert list(engram.store.app.snapshots.get(being.id, desc=True, limit=1))
    assert engram.audit.state("being", "Aria", version=2)["cycle"] == 1


def test_soul_limits(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.define_soul("Aria", "Curious, warm, dry humour.")
    assert engram.audit.state("being", "Aria")["soul"].startswith("Curious")
    with pytest.raises(InvalidInput):
        engram.beings.define_soul("Aria", "x" * (64 * 1024 + 1))
    with pytest.raises(InvalidTransition):
        engram.store.get(
            Note, UUID(engram.notes.take("Aria", NoteInput(kind="todo", text="t")).note_id)
        ).scene_input()
