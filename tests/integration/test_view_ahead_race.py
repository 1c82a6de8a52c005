"""A view is taken for ahead of the log only when it is (ADR 0032), and a read never rebuilds one.

Concurrent reads that reactivate nodes write, and catch the views up, while another read compares
the log's head with a view's position: a head read before the position must not make that view look
ahead of the log. A view that really is ahead (a power cut, ADR 0018) fails the reads of it with a
clear error; the worker or an admin command rebuilds it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from engram.projections import engine
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.views import ViewDiverged
from tests.integration.test_reading_fast_paths import populate
from tests.integration.test_relaxed_commits import _after_a_power_cut, _note


def _generations(e: Engram) -> dict[str, int]:
    return {n: engine.status(e.views.dbs[n], e.views.projections[n]).generation for n in e.views.names()}


def test_a_view_another_reader_moved_on_meanwhile_is_not_ahead_of_the_log(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(engram, "Aria", 12, seed=1)
    before = _generations(engram)
    engram.notes.take("Aria", NoteInput(kind="todo", text="a write: the views are behind the head"))
    original = engine.position
    raced: list[int] = []

    def racing(db: Any, projection: Any) -> Any:
        if projection.name == "memory" and not raced:
            # Between this read's head and its reading of the memory view's position, two other
            # reads reactivate nodes (writes) and catch the views up past that head.
            raced.append(engram.store.head())
            other = threading.Thread(
                target=lambda: [engram.reading.query("Aria", "garden river", 3) for _ in range(2)]
            )
            other.start()
            other.join()
        return original(db, projection)

    monkeypatch.setattr(engine, "position", racing)
    with capture_logs() as logs:
        engram.views.ensure()
    assert (
        raced
        and engine.status(engram.views.dbs["memory"], engram.views.projections["memory"]).position > raced[0]
    )
    assert _generations(engram) == before, "no rebuild"
    assert not [r for r in logs if "ahead of the log" in r["event"]]


def test_concurrent_reactivating_readers_never_take_a_view_for_ahead_of_the_log(engram: Engram) -> None:
    populate(engram, "Aria", 40, seed=2)
    before = _generations(engram)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def reader(i: int) -> None:
        start.wait()
        for j in range(6):
            try:
                engram.reading.query("Aria", ["garden river", "violin chess", "bread oven"][(i + j) % 3], 5)
            except BaseException as exc:  # a lost reactivation race too: the readers' retries absorb them
                errors.append(exc)

    with capture_logs() as logs:
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert _generations(engram) == before, "no rebuild"
    assert not [r for r in logs if "ahead of the log" in r["event"]]
    engram.views.ensure()
    assert engram.views.positions() == dict.fromkeys(engram.views.names(), engram.store.head())


def test_a_read_of_a_view_really_ahead_of_the_log_fails_clearly_and_rebuilds_nothing(tmp_path: Path) -> None:
    e = _after_a_power_cut(tmp_path, ["one", "two"], ["lost"])
    try:
        _note(e, "three")  # takes the lost event's position
        _note(e, "four")
        with pytest.raises(
            ViewDiverged, match=r"notes view is ahead of the event log.*projections rebuild notes"
        ):
            e.views.ensure(names=["notes"])
        assert _generations(e)["notes"] == 1
        status = engine.status(e.views.dbs["notes"], e.views.projections["notes"])
        assert status.last_error is not None and status.last_error.startswith("LogDiverged")
        assert {p["view"]: p["last_error"] for p in e.views.problems()}["notes"] == "LogDiverged"

        assert e.views.rebuild("notes") == 2  # `engram projections rebuild notes`
        e.views.ensure(names=["notes"])
        assert engine.status(e.views.dbs["notes"], e.views.projections["notes"]).last_error is None
    finally:
        e.close()
