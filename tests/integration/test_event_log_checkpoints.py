"""The SQLite event log checkpoints its write-ahead log on a thread of its own, as the views do
(ADR 0016): no save, durable or not, copies the log back into the database itself."""

from __future__ import annotations

import time
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from engram.adapters.eventstore.recorders import EngramSQLiteFactory
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from tests.integration.test_view_checkpoints import wal_frames
from tests.support import SteppingClock

SCENE = validate_scene_object({"action": "x" * 1500, "actors": ["me"], "when": ["2026-04-01"]})


@pytest.fixture
def engram(sqlite_engram: Engram) -> Engram:
    return sqlite_engram


def factory(e: Engram) -> EngramSQLiteFactory:
    f = e.store.app.factory
    assert isinstance(f, EngramSQLiteFactory) and f.checkpointer is not None
    return f


def save_nodes(e: Engram, commits: int, per_commit: int = 40) -> list[MemoryNode]:
    registered = e.beings.register(f"b{uuid4().hex[:6]}")
    root = e.store.get(Cluster, UUID(registered.roots["Business"]))
    nodes = []
    for _ in range(commits):
        batch = [MemoryNode.create(uuid4(), SCENE, root, 0, e.clock.now()) for _ in range(per_commit)]
        for node in batch:
            node.embed(Embedding.from_floats("m", [0.5] * 384), e.clock.now())
        e.store.save(*batch)
        nodes += batch
    return nodes


def test_saves_leave_the_checkpoint_to_the_thread(engram: Engram, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpointer = factory(engram).checkpointer
    assert checkpointer is not None
    checkpointer.stop()  # a thread started by the setup's commits
    monkeypatch.setattr(checkpointer, "committed", lambda: None)  # no thread: commits alone
    path = checkpointer.path
    before = path.stat().st_size
    nodes = save_nodes(engram, 15)  # ~1,500 pages: past SQLite's default automatic checkpoint at 1,000
    for node in nodes[:200]:  # and commits that do not wait for the disk (a recall's)
        node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    engram.store.save(*nodes[:200], durable=False)
    # Every page is still in the log: no commit copied any back into the database file.
    assert wal_frames(path) > 1000 and path.stat().st_size == before


def test_the_thread_keeps_the_log_checkpointed(tmp_path: Path) -> None:
    engram = bootstrap(
        Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none"), clock=SteppingClock()
    )
    try:
        checkpointer = factory(engram).checkpointer
        assert checkpointer is not None
        for _ in range(3):
            save_nodes(engram, 10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and checkpointer.covered < checkpointer.commits:
                time.sleep(0.05)
            assert checkpointer.last is not None
            busy, frames, done = checkpointer.last
            assert busy == 0 and done == frames > 0
        thread = checkpointer._thread
        assert thread is not None and thread.is_alive()
    finally:
        engram.close()
    assert not thread.is_alive()
