"""A new soul note supersedes the being's current soul in the same transaction (ADR 0047), on both
backends: one after another, in one batch (the later wins), and taken at once by two writers."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from engram.domain.note import Note, SupersedeReason
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from tests.support import SeededIds, SteppingClock, race


def _soul(text: str) -> NoteInput:
    return NoteInput(kind="soul", text=text)


def _active_souls(engram: Engram, being_id: str) -> list[str]:
    engram.views.ensure(names=["notes"])
    return [
        r["id"] for r in engram.views.read.notes(UUID(being_id), kinds=["soul"]) if r["superseded_by"] is None
    ]


def test_a_new_soul_supersedes_the_current_one(engram: Engram) -> None:
    engram.beings.register("Aria")
    first = engram.notes.take("Aria", _soul("Curious and kind."))
    assert first.superseded == [] and first.stability == "permanent"
    second = engram.notes.take("Aria", _soul("Curious, kind, and brief."))
    assert second.superseded == [first.note_id]
    old = engram.store.get(Note, UUID(first.note_id))
    assert old.superseded_by == UUID(second.note_id)
    assert engram.store.get(Note, UUID(second.note_id)).supersedes == [old.id]
    assert _active_souls(engram, second.being_id) == [second.note_id]
    # Other kinds leave the soul alone; another being's soul is its own.
    assert engram.notes.take("Aria", NoteInput(kind="todo", text="Call Mina")).superseded == []
    engram.beings.register("Bo")
    bo = engram.notes.take("Bo", _soul("Quiet."))
    assert bo.superseded == []
    assert _active_souls(engram, second.being_id) == [second.note_id]


def test_an_idempotent_replay_of_a_soul_supersedes_nothing(engram: Engram) -> None:
    engram.beings.register("Aria")
    first = engram.notes.take("Aria", NoteInput(kind="soul", text="Calm.", idempotency_key="s-1"))
    again = engram.notes.take("Aria", NoteInput(kind="soul", text="Calm.", idempotency_key="s-1"))
    assert again.duplicate and again.superseded == [] and again.note_id == first.note_id
    assert _active_souls(engram, first.being_id) == [first.note_id]


def test_in_a_batch_the_later_soul_wins(engram: Engram) -> None:
    engram.beings.register("Aria")
    before = engram.notes.take("Aria", _soul("The first soul."))
    taken = engram.notes.take_many(
        "Aria", [_soul("Second."), NoteInput(kind="todo", text="x"), _soul("Third.")]
    ).notes
    assert taken[0].superseded == [before.note_id]
    assert taken[2].superseded == [taken[0].note_id]
    assert _active_souls(engram, before.being_id) == [taken[2].note_id]
    second = engram.store.get(Note, UUID(taken[0].note_id))
    assert second.superseded_by == UUID(taken[2].note_id)
    reasons = [e.reason for e in engram.store.events(second.id) if isinstance(e, Note.Superseded)]
    assert reasons == [SupersedeReason.SOUL.value]


def test_two_souls_taken_at_once_leave_exactly_one_active(
    engram: Engram, make_settings: Callable[..., Settings]
) -> None:
    """Both writers read the being's soul chain before either saves (a barrier holds each first
    save): one save loses the race, its command runs again and supersedes the winner's soul."""
    engram.beings.register("Aria")
    first = engram.notes.take("Aria", _soul("The first soul."))
    other = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(10_000))
    try:
        a, b = race(engram, other, lambda e, name: e.notes.take("Aria", _soul(f"Soul from {name}.")))
    finally:
        other.close()
    assert not isinstance(a, Exception) and not isinstance(b, Exception), (a, b)
    # The winner superseded the first soul; the retried one superseded the winner's.
    winner, loser = (a, b) if a.superseded == [first.note_id] else (b, a)
    assert winner.superseded == [first.note_id]
    assert loser.superseded == [winner.note_id]
    assert _active_souls(engram, first.being_id) == [loser.note_id]
    assert engram.store.get(Note, UUID(winner.note_id)).superseded_by == UUID(loser.note_id)
