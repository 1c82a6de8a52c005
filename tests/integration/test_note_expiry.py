"""The expiry sweep and the worker's note maintenance (ADR 0048), on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.note import Note, NoteKind
from engram.projections.notes import utc_text
from engram.services.beings import resolve_being_id
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.note_expiry import NoteExpirySweep
from engram.services.worker import Worker
from tests.integration.http_support import wait_until
from tests.note_support import load_together, old_volatile_note
from tests.support import SeededIds, SteppingClock


@pytest.fixture
def aria(engram: Engram) -> Engram:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    return engram


def _due(engram: Engram, count: int, being: str = "Aria", days_ago: int = 3) -> list[UUID]:
    """`count` notes that happened `days_ago` with a TTL of one day: due at once."""
    at = engram.clock.now() - timedelta(days=days_ago)
    taken = engram.notes.take_many(
        being,
        [
            NoteInput(kind=NoteKind.LOG, text=f"job {i} ran", stability="volatile", ttl_days=1, at=at)
            for i in range(count)
        ],
    )
    return [UUID(n.note_id) for n in taken.notes]


def _lasting(engram: Engram, being: str = "Aria") -> UUID:
    taken = engram.notes.take(being, NoteInput(kind=NoteKind.LOG, text="still fresh", ttl_days=30))
    return UUID(taken.note_id)


def test_sweep_records_every_due_note_once_across_beings(aria: Engram, clock: SteppingClock) -> None:
    due = _due(aria, 3) + _due(aria, 2, being="Bo")
    fresh, forever = _lasting(aria), UUID(aria.notes.take("Aria", NoteInput(kind="todo", text="t")).note_id)
    aria.views.ensure(names=["notes"])
    seen_at = clock.current
    report = aria.note_expiry.sweep()
    assert (report.expired, report.skipped) == (5, 0)
    assert datetime.fromisoformat(report.at) == seen_at
    for note_id in due:
        note = aria.store.get(Note, note_id)
        expired = [
            e for e in aria.store.app.repository.event_store.get(note_id) if isinstance(e, Note.Expired)
        ]
        assert note.expired and len(expired) == 1
        assert expired[0].timestamp == seen_at  # the clock reading is the event's
    assert not aria.store.get(Note, fresh).expired and not aria.store.get(Note, forever).expired
    aria.views.ensure(names=["notes"])
    assert aria.note_expiry.sweep().expired == 0  # the view now says they are recorded
    assert aria.views.read.notes_due(utc_text(aria.clock.now())) == []


def test_sweep_goes_in_bounded_batches(aria: Engram) -> None:
    due = _due(aria, 7)
    aria.views.ensure(names=["notes"])
    sweep = NoteExpirySweep(aria.store, aria.clock, aria.runner, lambda: aria.views.read, batch_size=3)
    saves: list[int] = []
    real_save = aria.store.save

    def save(*aggregates: Any, **kw: Any) -> Any:
        saves.append(len(aggregates))
        return real_save(*aggregates, **kw)

    aria.store.save = save  # type: ignore[method-assign]
    report = sweep.sweep()
    assert (report.expired, report.batches) == (7, 3) and saves == [3, 3, 1]
    assert all(aria.store.get(Note, i).expired for i in due)


def test_a_note_another_sweep_recorded_is_skipped(aria: Engram) -> None:
    """The view still lists a note a concurrent sweep already recorded: this sweep skips it."""
    due = _due(aria, 3)
    aria.views.ensure(names=["notes"])
    first = aria.store.get(Note, due[0])
    first.expire(aria.clock.now())
    aria.store.save(first)  # the view has not seen it
    report = aria.note_expiry.sweep()
    assert (report.expired, report.skipped) == (2, 1)


def test_two_sweeps_at_once_both_finish(aria: Engram) -> None:
    """Both load the same batch before either saves: the second save conflicts, runs again on fresh
    state, skips what the first recorded. Neither sweep fails; each note expires once."""
    due = _due(aria, 4)
    aria.views.ensure(names=["notes"])
    load_together(aria.store)
    reports: list[Any] = []
    threads = [threading.Thread(target=lambda: reports.append(aria.note_expiry.sweep())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(reports) == 2
    assert sorted((r.expired, r.skipped) for r in reports) == [(0, 4), (4, 0)]
    for note_id in due:
        events = aria.store.app.repository.event_store.get(note_id)
        assert sum(isinstance(e, Note.Expired) for e in events) == 1


def _worker_does(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    setup: Callable[[Engram], Callable[[], bool]],
) -> bool:
    """A worker of the notes view, with both note tasks every 50 ms, until `setup`'s check holds."""
    e = bootstrap(
        make_settings(note_sweep_interval_s=0.05, note_maintenance_interval_s=0.05),
        clock=clock,
        ids=SeededIds(),
    )
    try:
        e.beings.register("Aria")
        done = setup(e)
        worker = Worker(
            e.views,
            names=["notes"],
            poll_interval=0.05,
            note_sweep=e.note_expiry.sweep,
            note_maintenance=e.note_maintenance.run,
        )
        worker.start()
        try:
            return wait_until(done, timeout=30)
        finally:
            worker.stop()
    finally:
        e.close()


def test_the_worker_sweeps_by_itself(make_settings: Callable[..., Settings], clock: SteppingClock) -> None:
    def setup(e: Engram) -> Callable[[], bool]:
        due = _due(e, 2)
        return lambda: all(e.store.get(Note, i).expired for i in due)

    assert _worker_does(make_settings, clock, setup)


# -- the maintenance merge ---------------------------------------------------------------------------


def _old_volatile(engram: Engram, being: str, kind: str, text: str, at: datetime, **kw: Any) -> UUID:
    note = old_volatile_note(engram.ids.new_id(), resolve_being_id(engram.store, being), kind, text, at, **kw)
    engram.store.save(note)
    return note.id


def test_maintenance_merges_old_volatile_notes_in_batches_of_five(aria: Engram, clock: SteppingClock) -> None:
    old = clock.current - timedelta(days=8)
    logs = [_old_volatile(aria, "Aria", "log", f"log {i}", old + timedelta(minutes=i)) for i in range(7)]
    lone = _old_volatile(aria, "Aria", "knowledge", "a lone fact", old)
    other_scope = [_old_volatile(aria, "Aria", "log", f"job log {i}", old, scope="job") for i in range(2)]
    recent = _old_volatile(aria, "Aria", "log", "yesterday", clock.current - timedelta(days=1))
    bo = [_old_volatile(aria, "Bo", "log", f"Bo {i}", old) for i in range(2)]
    aria.views.ensure(names=["notes"])
    report = aria.note_maintenance.run()
    merged = sorted(report.merged, key=lambda m: len(m.sources), reverse=True)
    assert [len(m.sources) for m in merged] == [5, 2, 2, 2]
    assert {tuple(m.sources) for m in merged} == {
        tuple(str(i) for i in logs[:5]),
        tuple(str(i) for i in logs[5:]),
        tuple(str(i) for i in other_scope),
        tuple(str(i) for i in bo),
    }
    assert all(m.method == "concatenation" for m in merged)  # no LLM configured
    assert aria.store.get(Note, lone).superseded_by is None
    assert aria.store.get(Note, recent).superseded_by is None
    summary = aria.store.get(Note, UUID(merged[0].note_id))
    assert summary.stability == "stable" and summary.text.startswith("Merge of 5 notes")
    aria.views.ensure(names=["notes"])
    assert aria.note_maintenance.run().merged == []  # summaries are stable: nothing more to merge


def test_maintenance_of_one_being(aria: Engram, clock: SteppingClock) -> None:
    old = clock.current - timedelta(days=10)
    mine = [_old_volatile(aria, "Aria", "log", f"mine {i}", old) for i in range(2)]
    theirs = [_old_volatile(aria, "Bo", "log", f"theirs {i}", old) for i in range(2)]
    aria.views.ensure(names=["notes"])
    [done] = aria.note_maintenance.run("Aria").merged
    assert done.sources == [str(i) for i in mine]
    assert all(aria.store.get(Note, i).superseded_by is None for i in theirs)


def test_a_rebuild_gives_the_same_notes_view(aria: Engram, clock: SteppingClock) -> None:
    """Supersedes, a merge, expiries and a maintenance merge: the notes view rebuilt from the log equals
    the live one (no LLM or embedder is there to call: the text is in the events)."""
    due = _due(aria, 3)
    a, b = (UUID(aria.notes.take("Aria", NoteInput(kind="knowledge", text=t)).note_id) for t in ("x", "y"))
    aria.note_lifecycle.supersede("Aria", a, b)
    c, d = (UUID(aria.notes.take("Aria", NoteInput(kind="todo", text=t)).note_id) for t in ("c", "d"))
    aria.note_lifecycle.merge("Aria", [c, d])
    old = clock.current - timedelta(days=9)
    for i in range(3):
        _old_volatile(aria, "Aria", "log", f"old {i}", old)
    aria.views.ensure(names=["notes"])
    aria.note_expiry.sweep()
    aria.note_maintenance.run()
    aria.views.ensure(names=["notes"])
    being_id = resolve_being_id(aria.store, "Aria")
    live = aria.views.read.notes(being_id)
    assert {r["id"] for r in live if r["expired"]} == {str(i) for i in due}
    assert sum(r["superseded_by"] is not None for r in live) == 1 + 2 + 3  # a; c and d; the old logs
    aria.views.rebuild("notes")
    assert aria.views.read.notes(being_id) == live


def test_the_worker_merges_old_volatile_notes_by_itself(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    def setup(e: Engram) -> Callable[[], bool]:
        old = clock.current - timedelta(days=8)
        ids = [_old_volatile(e, "Aria", "log", f"old {i}", old) for i in range(2)]
        return lambda: all(e.store.get(Note, i).superseded_by for i in ids)

    assert _worker_does(make_settings, clock, setup)
