"""Superseding notes and reading their chains (ADR 0048), on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.note import Note, NoteKind
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.errors import NotFound
from tests.note_support import load_together
from tests.support import SteppingClock


def _note(engram: Engram, text: str, being: str = "Aria", **kw: Any) -> UUID:
    kw.setdefault("kind", NoteKind.KNOWLEDGE)
    return UUID(engram.notes.take(being, NoteInput(text=text, **kw)).note_id)


@pytest.fixture
def aria(engram: Engram) -> Engram:
    engram.beings.register("Aria")
    return engram


def test_supersede_marks_both_notes_and_the_view(aria: Engram) -> None:
    a, b = _note(aria, "the office is on floor 3"), _note(aria, "the office moved to floor 5")
    done = aria.note_lifecycle.supersede("Aria", a, b)
    assert (done.old, done.by, done.reason) == (str(a), str(b), "manual")
    old, new = aria.store.get(Note, a), aria.store.get(Note, b)
    assert old.superseded_by == b and new.supersedes == [a] and new.superseded_by is None
    aria.views.ensure(names=["notes"])
    rows = {r["id"]: r for r in aria.views.read.notes(aria.store.get(Note, a).being_id)}
    assert rows[str(a)]["superseded_by"] == str(b) and rows[str(a)]["superseded_reason"] == "manual"
    assert rows[str(b)]["superseded_by"] is None


def test_history_follows_the_chain_both_ways(aria: Engram) -> None:
    a, b, c = (_note(aria, f"soul v{i}") for i in (1, 2, 3))
    aria.note_lifecycle.supersede("Aria", a, b)
    aria.note_lifecycle.supersede("Aria", b, c)
    chain = aria.note_lifecycle.history("Aria", b)
    assert chain.note.id == str(b)
    assert [link.id for link in chain.replaced] == [str(a)]
    assert [link.id for link in chain.replaced_by] == [str(c)]
    assert [link.id for link in aria.note_lifecycle.history("Aria", a).replaced_by] == [str(b), str(c)]
    assert [link.id for link in aria.note_lifecycle.history("Aria", c).replaced] == [str(b), str(a)]
    assert not chain.cut


def test_history_hides_sensitive_texts_unless_asked(aria: Engram) -> None:
    a = _note(aria, "my PIN is 1234", sensitivity="sensitive")
    b = _note(aria, "my PIN changed")
    aria.note_lifecycle.supersede("Aria", a, b)
    assert aria.note_lifecycle.history("Aria", b).replaced[0].text is None
    shown = aria.note_lifecycle.history("Aria", b, include_sensitive=True)
    assert shown.replaced[0].text == "my PIN is 1234"


def _refused(engram: Engram, call: Any, error: type[Exception], match: str) -> Exception:
    """`call` raises `error` (its message matching) and writes nothing to the log."""
    head = engram.store.log.head()
    with pytest.raises(error, match=match) as caught:
        call()
    assert engram.store.log.head() == head
    return caught.value


def test_refusals_write_nothing(aria: Engram, clock: SteppingClock) -> None:
    aria.beings.register("Bo")
    a, b, c = (_note(aria, f"fact {i}") for i in (1, 2, 3))
    theirs = _note(aria, "Bo's note", being="Bo")
    life = aria.note_lifecycle
    err = _refused(aria, lambda: life.supersede("Aria", a, a), InvalidInput, "itself")
    assert err.details["field"] == "by"  # type: ignore[attr-defined]
    stranger = uuid4()
    unknown = _refused(aria, lambda: life.supersede("Aria", a, stranger), NotFound, "not found")
    other = _refused(aria, lambda: life.supersede("Aria", a, theirs), NotFound, "not found")
    # Another being's note reads exactly as an unknown one: nothing tells that it exists.
    assert str(other).replace(str(theirs), "ID") == str(unknown).replace(str(stranger), "ID")
    _refused(aria, lambda: life.supersede("Aria", theirs, a), NotFound, "not found")
    _refused(aria, lambda: life.supersede("Aria", "not-an-id", a), InvalidInput, "not a note id")
    life.supersede("Aria", a, b)
    _refused(aria, lambda: life.supersede("Aria", b, a), InvalidTransition, "itself superseded")  # a cycle
    _refused(aria, lambda: life.supersede("Aria", a, c), InvalidTransition, "already superseded")
    past = clock.current - timedelta(days=10)
    gone = _note(aria, "a week's parking code", stability="volatile", ttl_days=7, at=past)
    _refused(aria, lambda: life.supersede("Aria", c, gone), InvalidTransition, "expired")


def test_crossing_supersedes_one_wins_the_other_is_refused(aria: Engram) -> None:
    """A by B and B by A at once: both load before either saves; the loser's save conflicts, it runs
    again on fresh state and is refused (a cycle never forms)."""
    a, b = _note(aria, "plan A"), _note(aria, "plan B")
    loads = load_together(aria.store)
    outcomes: dict[str, object] = {}

    def run(name: str, old: UUID, by: UUID) -> None:
        try:
            outcomes[name] = aria.note_lifecycle.supersede("Aria", old, by)
        except Exception as exc:
            outcomes[name] = exc

    threads = [
        threading.Thread(target=run, args=("a_by_b", a, b)),
        threading.Thread(target=run, args=("b_by_a", b, a)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    refused = [o for o in outcomes.values() if isinstance(o, InvalidTransition)]
    won = [o for o in outcomes.values() if not isinstance(o, Exception)]
    assert len(refused) == 1 and len(won) == 1, outcomes
    assert max(loads.values()) >= 2  # the loser ran again after its save conflicted
    old, new = aria.store.get(Note, a), aria.store.get(Note, b)
    assert [old.superseded_by, new.superseded_by].count(None) == 1
