"""The in-process catch-up keeps its locks open and remembers positions, and still misses nothing.

`Views.ensure` keeps one lock per view open between catch-ups (adapters/locks.py) and skips reading a
view's position when this process already saw it reach the target. Neither may let two processes or
threads process a view at once, nor skip an event another process wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engram.adapters.locks import AdvisoryLock, FileLock, HeldOpenAdvisoryLock, HeldOpenFileLock
from engram.projections import engine
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.support import SeededIds, SteppingClock, require_postgres

_TRY_IN_CHILD = """
import sys
from pathlib import Path
from engram.adapters.locks import FileLock
lock = FileLock(Path(sys.argv[1]))
print("taken" if lock.try_acquire() else "refused")
"""


def _other_process_takes(path: Path) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", _TRY_IN_CHILD, str(path)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "taken"


def test_held_open_file_lock_excludes_other_processes_threads_and_locks(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "memory.process.lock"
    lock = HeldOpenFileLock(path)
    assert lock.try_acquire()
    assert not lock.try_acquire(), "not re-entrant"
    assert not FileLock(path).try_acquire()
    assert not HeldOpenFileLock(path).try_acquire()
    assert not _other_process_takes(path)
    from_thread: list[bool] = []
    thread = threading.Thread(target=lambda: from_thread.append(lock.try_acquire()))
    thread.start()
    thread.join()
    assert from_thread == [False]

    lock.release()
    fd = lock._fd
    assert fd is not None, "the file stays open between acquisitions"
    assert _other_process_takes(path), "released: another process takes it (and its exit frees it)"
    other = FileLock(path)
    assert other.try_acquire()
    assert not lock.try_acquire(), "held by another open file"
    other.release()
    assert lock.try_acquire()
    assert lock._fd == fd
    lock.release()
    lock.close()
    assert lock._fd is None


def test_held_open_file_lock_two_threads_never_hold_it_at_once(tmp_path: Path) -> None:
    lock = HeldOpenFileLock(tmp_path / "x.lock")
    holders = 0
    overlap: list[int] = []
    guard = threading.Lock()

    def work() -> None:
        nonlocal holders
        for _ in range(300):
            if lock.try_acquire():
                with guard:
                    holders += 1
                    if holders > 1:
                        overlap.append(holders)
                with guard:
                    holders -= 1
                lock.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlap == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_held_open_file_lock_in_a_forked_child_does_not_share_the_parents_lock(tmp_path: Path) -> None:
    lock = HeldOpenFileLock(tmp_path / "x.lock")
    assert lock.try_acquire()
    lock.release()
    assert lock.try_acquire()  # the parent holds it through the file the child inherits
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        lock._held = False  # even a copy that believes it is free must not get in
        os._exit(0 if not lock.try_acquire() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not FileLock(tmp_path / "x.lock").try_acquire(), "the child's exit left the parent's lock alone"
    lock.release()


def test_held_open_file_lock_reopens_a_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    lock = HeldOpenFileLock(path)
    assert lock.try_acquire()
    lock.release()
    path.unlink()
    other = FileLock(path)  # creates a new file at the path
    assert other.try_acquire()
    assert not lock.try_acquire(), "the new file is the lock now"
    other.release()
    assert lock.try_acquire()
    lock.release()


def test_held_open_advisory_lock_excludes_other_sessions_and_keeps_its_connection() -> None:
    url = require_postgres()
    key = f"engram:test:held-open:{os.getpid()}"
    lock = HeldOpenAdvisoryLock(url, key)
    assert lock.try_acquire()
    assert not lock.try_acquire()
    assert not AdvisoryLock(url, key).try_acquire()
    conn = lock._conn
    lock.release()
    assert lock._conn is conn and conn is not None and not conn.closed
    other = AdvisoryLock(url, key)
    assert other.try_acquire(), "release() unlocked it"
    assert not lock.try_acquire()
    other.release()
    assert lock.try_acquire()
    assert lock._conn is conn
    conn.close()  # a dropped connection ends the session, and with it the lock
    assert AdvisoryLock(url, key).try_acquire() is True
    lock.release()
    assert lock.try_acquire(), "a broken connection is replaced"
    lock.release()
    lock.close()
    assert lock._conn is None


def test_ensure_sees_what_another_process_wrote_after_its_cached_position(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(1))
    second = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(2))
    try:
        first.beings.register("Aria")
        first.views.ensure()
        reads: list[str] = []
        original = engine.position

        def counted(db: Any, projection: Any) -> tuple[int, bool]:
            reads.append(projection.name)
            return original(db, projection)

        monkeypatch.setattr(engine, "position", counted)
        first.views.ensure()
        assert reads == [], "caught up and already seen there: no position read"

        second.beings.register("Bo")  # another writer on the same log; `first` never saw it
        first.views.ensure(names=["beings"])
        assert reads == ["beings"]
        assert {r["name"] for r in first.views.read.beings()} == {"Aria", "Bo"}

        # A worker (here: the other instance) that catches the view up meanwhile: `first` waits for
        # nothing and still reads the rows.
        second.beings.register("Cy")
        second.views.ensure(names=["beings"])
        first.views.ensure(names=["beings"])
        assert {r["name"] for r in first.views.read.beings()} == {"Aria", "Bo", "Cy"}
    finally:
        second.close()
        first.close()


def test_ensure_checks_the_schema_version_on_first_use(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    e = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(1))
    try:
        e.beings.register("Aria")
        e.views.ensure()
        rebuilt: list[str] = []
        monkeypatch.setattr(type(e.views), "rebuild", lambda self, name, progress=None: rebuilt.append(name))
        monkeypatch.setattr(type(e.views.projections["beings"]), "schema_version", 99)
        fresh = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(2))
        try:
            fresh.views.ensure(names=["beings"])
        finally:
            fresh.close()
        assert rebuilt == ["beings"]
    finally:
        e.close()


def _nodes_written(e: Any, count: int) -> None:
    from uuid import uuid4

    from engram.domain.being import Being
    from engram.domain.embedding import Embedding
    from engram.domain.node import MemoryNode
    from engram.domain.scene import validate_scene_object

    being, business, private = Being.register(f"B{uuid4().hex[:6]}", e.clock.now())
    e.store.save(being, business, private)
    nodes = []
    for i in range(count):
        scene = validate_scene_object({"action": f"scene {i}", "actors": ["me"], "when": ["2026-05-02"]})
        node = MemoryNode.create(uuid4(), scene, business, 0, e.clock.now())
        node.embed(Embedding.from_floats("m", [1.0, float(i), 0.5]), e.clock.now())
        nodes.append(node)
    e.store.save(*nodes)


def test_views_a_few_events_behind_share_one_read(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    from uuid import UUID

    from engram.projections.engine import SharedRead

    e = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(1))
    try:
        _nodes_written(e, 3)
        e.views.ensure()
        _nodes_written(e, 4)
        head = e.store.head()
        start = e.views.positions(["memory"])["memory"]
        topics = sorted(
            set(e.views.projections["memory"].topics) | set(e.views.projections["vectors"].topics)
        )
        shared = SharedRead(e.store, start, head, topics, e.store.tagged_events(start + 1, 100, topics, head))
        for view in ("memory", "vectors", "beings"):
            wanted = e.views.projections[view].topics
            for first, limit, stop in (
                (start + 1, 100, head),
                (start + 3, 2, head),
                (start + 1, 100, head - 1),
            ):
                served = shared.decoded_events(first, limit, wanted, stop)
                direct = e.store.decoded_events(first, limit, wanted, stop)
                assert [(p, type(x), vars(x)) for p, x in served] == [
                    (p, type(x), vars(x)) for p, x in direct
                ]
        # Outside what was read: from the log.
        assert [p for p, _ in shared.decoded_events(1, 1000, topics, head)] == [
            p for p, _ in e.store.decoded_events(1, 1000, topics, head)
        ]

        reads: list[int] = []
        for method in ("decoded_events", "tagged_events"):
            original = getattr(type(e.store), method)

            def counted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                reads.append(1)
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(type(e.store), method, counted)
        e.views.ensure(names=["memory", "vectors"])
        assert len(reads) == 1, "one read for both views"
        assert e.views.positions(["memory", "vectors"]) == {"memory": head, "vectors": head}

        def nodes() -> list[Any]:
            return [
                e.views.read.nodes(UUID(r["id"]), order="recent", limit=100) for r in e.views.read.beings()
            ]

        live = nodes()
        e.views.rebuild_all(["memory", "vectors"])
        assert nodes() == live, "the shared read built what a rebuild from the log builds"
    finally:
        e.close()
