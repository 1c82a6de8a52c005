"""A rebuild killed between creating a vector collection and committing its record leaves an orphan
collection; the next rebuild, the worker when it starts and `engram projections gc` drop it, never
the collections that serve nor those a running rebuild fills. On Qdrant Edge and on qdrant-client
(its local mode on disk, standing for a server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram.projections import engine
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.worker import Worker
from tests.integration.orphan_child import index_factory
from tests.integration.test_reading_fast_paths import populate
from tests.support import ROOT, SeededIds, SteppingClock, settings_json

ADAPTERS = ["edge", "qdrant-local"]


def _open(settings: Settings, adapter: str, tmp_path: Path) -> Engram:
    return bootstrap(
        settings,
        clock=SteppingClock(),
        ids=SeededIds(),
        vector_index=index_factory(adapter, tmp_path / "qdrant"),
    )


def _killed_rebuild(settings: Settings, adapter: str, tmp_path: Path) -> str:
    """Runs the child (orphan_child.py); returns the collection it created before it was killed."""
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.orphan_child",
            settings_json(settings),
            adapter,
            str(tmp_path / "qdrant"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stderr[-2000:]
    [created] = [line.split()[1] for line in child.stdout.splitlines() if line.startswith("created ")]
    return created


@pytest.fixture
def world(tmp_path: Path, adapter: str) -> tuple[Settings, list[str], str]:
    """A deployment with vectors, a rebuild of them killed: (settings, the live collections, the orphan)."""
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    with _open(settings, adapter, tmp_path) as e:
        populate(e, "Aria", 12, seed=3)
        live = e.views.vector_index.list_collections()
    assert live and all(name.endswith("__g1") for name in live)
    orphan = _killed_rebuild(settings, adapter, tmp_path)
    assert orphan.endswith("__g2")
    return settings, live, orphan


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def test_gc_drops_an_orphan_collection_and_never_what_serves_or_a_running_rebuild_fills(
    world: tuple[Settings, list[str], str], adapter: str, tmp_path: Path
) -> None:
    settings, live, orphan = world
    with _open(settings, adapter, tmp_path) as e:
        index = e.views.vector_index
        assert set(index.list_collections()) == {*live, orphan}
        db, vectors = e.views.dbs["vectors"], e.views.projections["vectors"]
        assert engine.status(db, vectors).building == {2: 0}  # its batch never committed

        running = e.views.lock("vectors", "rebuild")  # as a rebuild in another process holds it
        assert running.try_acquire()
        try:
            assert e.views.collect_garbage(["vectors"]) == {"vectors": "skipped: a rebuild is running"}
            assert orphan in index.list_collections()
        finally:
            running.release()

        done = e.views.collect_garbage()
        assert done["vectors"] == {"generations": [2], "extras": [orphan]}
        assert set(index.list_collections()) == set(live)
        assert engine.status(db, vectors).building == {}
        assert e.reading.query("Aria", "garden river", 3, reactivate=False).nodes  # the live ones serve
        assert e.views.collect_garbage()["vectors"] == {"generations": [], "extras": []}


def test_the_next_rebuild_drops_an_orphan_collection(
    world: tuple[Settings, list[str], str], adapter: str, tmp_path: Path
) -> None:
    settings, live, orphan = world
    with _open(settings, adapter, tmp_path) as e:
        assert e.views.rebuild("vectors") == 3
        collections = e.views.vector_index.list_collections()
        assert orphan not in collections and not set(live) & set(collections)
        assert collections and all(name.endswith("__g3") for name in collections)
        assert e.reading.query("Aria", "garden river", 3, reactivate=False).nodes


def test_the_worker_drops_an_orphan_collection_when_it_starts(
    world: tuple[Settings, list[str], str], adapter: str, tmp_path: Path
) -> None:
    settings, live, orphan = world
    with _open(settings, adapter, tmp_path) as e:
        assert orphan in e.views.vector_index.list_collections()
        worker = Worker(e.views, names=["vectors"], poll_interval=0.05)
        worker.start()
        worker.stop()
        assert set(e.views.vector_index.list_collections()) == set(live)
