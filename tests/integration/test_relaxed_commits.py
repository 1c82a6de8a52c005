"""Commits that skip the wait for the disk, and views that notice when the log lost them (ADR 0018).

- A recall's reactivations commit with `synchronous=NORMAL` on SQLite (no fsync); every other save
  keeps `FULL`, and the connection goes back to `FULL` after the relaxed commit.
- PostgreSQL: the relaxed insert turns `synchronous_commit` off for its own transaction only.
- A power cut may lose the end of the SQLite log after a view applied it; the lost positions then go
  to other events. A view checks that the log still holds, at its position, the event it applied
  there, and is rebuilt when it does not.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.sqlite import SQLiteConnectionPool

from engram.adapters.eventstore.recorders import PostgresEventRecorder
from engram.domain.note import NoteKind
from engram.projections import engine
from engram.services.beings import resolve_being_id
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.reading import Reading
from engram.services.views import ViewDiverged
from tests.integration.test_reading_fast_paths import populate
from tests.support import SeededIds, SteppingClock


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Engram, list[str]]]:
    """A SQLite engram whose event-log connections record every statement they run."""
    statements: list[str] = []
    create = SQLiteConnectionPool._create_connection

    def traced_connection(pool: SQLiteConnectionPool) -> Any:
        conn = create(pool)
        conn._sqlite_conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(SQLiteConnectionPool, "_create_connection", traced_connection)
    e = bootstrap(
        Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none"),
        clock=SteppingClock(),
        ids=SeededIds(),
    )
    yield e, statements
    e.close()


def writes(statements: list[str]) -> list[tuple[str, list[str], str]]:
    """Each transaction that inserts: (the statement just before it, its statements, the one just after)."""
    out = []
    for i, sql in enumerate(statements):
        if sql != "BEGIN":
            continue
        end = next(j for j in range(i, len(statements)) if statements[j] in ("COMMIT", "ROLLBACK"))
        body = statements[i : end + 1]
        if any(s.startswith("INSERT") for s in body):
            out.append(
                (
                    statements[i - 1] if i else "",
                    body,
                    statements[end + 1] if end + 1 < len(statements) else "",
                )
            )
    return out


def test_a_recall_commits_its_reactivations_without_an_fsync(traced: tuple[Engram, list[str]]) -> None:
    e, statements = traced
    populate(e, "Aria", 20, seed=3)
    statements.clear()
    found = Reading(e).query("Aria", "garden river", 3)
    assert found.position is not None and found.nodes
    [(before, relaxed, after)] = writes(statements)
    assert (before, relaxed[-1], after) == ("PRAGMA synchronous=NORMAL", "COMMIT", "PRAGMA synchronous=FULL")
    assert sum(s.startswith("INSERT INTO stored_events") for s in relaxed) == len(found.nodes)

    # A note is a command like any other: it waits for the disk.
    statements.clear()
    e.notes.take("Aria", NoteInput(kind=NoteKind.KNOWLEDGE, text="tomatoes need sun"))
    [(before, durable, after)] = writes(statements)
    assert not any(s.startswith("PRAGMA synchronous") for s in (before, *durable, after))
    # Every idle connection of the log's pool is back at FULL (2).
    pool = e.store.app.recorder.datastore.pool  # type: ignore[attr-defined]
    idle = list(pool._pool)  # the library has no public way to list them
    assert idle
    assert {c._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0] for c in idle} == {2}


def test_the_relaxed_postgres_insert_turns_synchronous_commit_off_for_its_transaction() -> None:
    executed: list[str] = []

    class Cursor:
        def execute(self, sql: str, *args: Any) -> None:
            executed.append(sql)

    recorder = PostgresEventRecorder.__new__(PostgresEventRecorder)  # the hook needs no connection
    recorder._insert_events(Cursor(), [], durable=False)  # type: ignore[arg-type]
    assert executed == ["SET LOCAL synchronous_commit TO OFF"]  # LOCAL: this transaction only
    executed.clear()
    recorder._insert_events(Cursor(), [])  # type: ignore[arg-type]
    assert executed == []


def test_a_relaxed_save_is_read_back_on_every_backend(engram: Engram) -> None:
    being_id, _ = populate(engram, "Aria", 12, seed=4)
    found = Reading(engram).query("Aria", "garden river bread", 3)
    assert found.position is not None
    engram.views.ensure(found.position)
    rows = {r["id"]: r for r in engram.views.read.nodes(being_id, ids=[UUID(n.id) for n in found.nodes])}
    assert found.nodes and all(rows[n.id]["reactivation_count"] == 1 for n in found.nodes)


# -- a log that lost its end after the views applied it ----------------------------------------------


def _settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")


def _note(e: Engram, text: str) -> None:
    e.notes.take("Aria", NoteInput(kind=NoteKind.KNOWLEDGE, text=text))


def _knowledge(e: Engram) -> list[str]:
    e.views.ensure(names=["notes"])
    being_id = resolve_being_id(e.store, "Aria")
    return sorted(n["text"] for n in e.views.read.notes(being_id, kinds=["knowledge"]))


def _lose_the_last_events(data_dir: Path, count: int) -> None:
    """What a power cut does to commits that had not reached the disk: the log ends earlier, and the
    next events take the lost positions again."""
    with sqlite3.connect(data_dir / "events.sqlite3") as conn:
        conn.execute(
            "DELETE FROM stored_events WHERE rowid IN "
            "(SELECT rowid FROM stored_events ORDER BY rowid DESC LIMIT ?)",
            [count],
        )


def _after_a_power_cut(tmp_path: Path, kept: Sequence[str], lost: Sequence[str]) -> Engram:
    """An engram whose views applied the notes `kept` then `lost`, opened again after the log lost
    the `lost` ones."""
    e = bootstrap(_settings(tmp_path), clock=SteppingClock(), ids=SeededIds())
    e.beings.register("Aria")
    for text in [*kept, *lost]:
        _note(e, text)
    assert len(_knowledge(e)) == len(kept) + len(lost)  # the views applied what the cut will lose
    e.close()
    _lose_the_last_events(tmp_path / "data", len(lost))
    return bootstrap(_settings(tmp_path), clock=SteppingClock(), ids=SeededIds(1000))


@pytest.mark.parametrize(("lost", "written"), [(3, 1), (2, 5)], ids=["log-shorter", "positions-refilled"])
def test_a_view_ahead_of_the_log_is_rebuilt(tmp_path: Path, lost: int, written: int) -> None:
    e = _after_a_power_cut(tmp_path, [f"kept {i}" for i in range(4)], [f"lost {i}" for i in range(lost)])
    try:
        for i in range(written):
            _note(e, f"after {i}")
        # A read says so and never rebuilds (ADR 0032); the worker or an admin command does.
        with pytest.raises(ViewDiverged, match="projections rebuild"):
            e.views.ensure()
        e.views.catch_up_or_rebuild()  # `engram worker --once`
        assert _knowledge(e) == sorted(
            [*(f"kept {i}" for i in range(4)), *(f"after {i}" for i in range(written))]
        )
    finally:
        e.close()


def test_processing_a_diverged_view_raises_until_it_is_rebuilt(tmp_path: Path) -> None:
    e = _after_a_power_cut(tmp_path, ["one"], ["two"])
    try:
        _note(e, "three")
        db, projection = e.views.dbs["notes"], e.views.projections["notes"]
        with pytest.raises(engine.LogDiverged, match="rebuild the view"):
            engine.process(db, projection, e.views.source)
        e.views.rebuild("notes")
        assert engine.process(db, projection, e.views.source) == 0
        assert _knowledge(e) == ["one", "three"]
    finally:
        e.close()


def test_the_worker_rebuilds_a_view_ahead_of_the_log(tmp_path: Path) -> None:
    from engram.services.worker import Worker

    e = _after_a_power_cut(tmp_path, ["one", "two"], ["lost"])
    try:
        for text in ("three", "four"):
            _note(e, text)
        db, projection = e.views.dbs["notes"], e.views.projections["notes"]
        worker = Worker(e.views, names=["notes"], poll_interval=0.05)
        worker.start()
        try:
            deadline = time.monotonic() + 20
            while engine.status(db, projection).generation == 1 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            worker.stop()
        assert engine.status(db, projection).generation > 1  # rebuilt, not retried with backoff
        assert worker.stats["notes"]["errors"] == 0
        assert _knowledge(e) == ["four", "one", "three", "two"]
    finally:
        e.close()


def test_a_reader_leaves_a_diverged_view_to_the_process_already_rebuilding_it(tmp_path: Path) -> None:
    e = _after_a_power_cut(tmp_path, ["one", "two"], ["lost"])
    try:
        elsewhere = e.views.lock("notes", "rebuild")  # as another process's rebuild holds it
        assert elsewhere.try_acquire()
        try:
            with pytest.raises(ViewDiverged):  # a read never rebuilds (ADR 0032), nor conflicts
                e.views.ensure(names=["notes"])
            assert engine.status(e.views.dbs["notes"], e.views.projections["notes"]).generation == 1
        finally:
            elsewhere.release()
        e.views.catch_up_or_rebuild(["notes"])  # what the worker does once the other rebuild is gone
        assert _knowledge(e) == ["one", "two"]
        assert engine.status(e.views.dbs["notes"], e.views.projections["notes"]).generation > 1
    finally:
        e.close()


def test_a_shared_read_gives_the_keys_the_log_gives(tmp_path: Path) -> None:
    """Views caught up together read the events once (`SharedRead`); the keys of their positions come
    from those events where they can, and are the log's."""
    from engram.projections.engine import SharedRead

    e = bootstrap(_settings(tmp_path), clock=SteppingClock(), ids=SeededIds())
    try:
        e.beings.register("Aria")
        _note(e, "one")
        after = e.store.head()
        _note(e, "two")
        e.beings.register("Bo")  # events of other topics inside the range: those keys come from the log
        _note(e, "three")
        head = e.store.head()
        topics = e.views.projections["notes"].topics
        events = e.store.tagged_events(after + 1, head - after, topics, head)
        shared = SharedRead(e.store, after, head, topics, events)
        assert shared.reuses_positions
        assert [shared.key_at(p) for p in range(1, head + 2)] == [
            e.store.key_at(p) for p in range(1, head + 2)
        ]
        assert e.store.key_at(head + 1) is None
    finally:
        e.close()
