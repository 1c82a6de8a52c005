"""Fixtures for the `VectorIndex` contract suite: one `vector_index` per adapter.

The parameter list is built at import time: the real-server parameter exists only when
`ENGRAM_QDRANT_URL` is set, so nothing is skipped silently and a run's test ids say which
adapters it covered. `edge-shared` is the embedded index reached through its owner in another
process (`vector_owner_child.py`, one for the session), as every process but the owner reaches it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engram.adapters.vectors import EdgeVectorIndex, QdrantVectorIndex, SharedEdgeVectorIndex
from engram.projections.vector_index import VectorIndex

# Edge's default indexing threshold (10 MB) would leave the suite's tiny collections unindexed,
# so `optimize()` would do nothing; 1 KB makes it really build HNSW.
EDGE_TEST_INDEXING_THRESHOLD_KB = 1

ADAPTERS: list[str] = ["edge", "edge-shared", "qdrant-memory"]
REPO = Path(__file__).resolve().parents[2]
if os.environ.get("ENGRAM_QDRANT_URL"):
    ADAPTERS.append("qdrant-server")


@contextmanager
def owner_process(root: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that owns the embedded index under `root` until the block ends."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.contract.vector_owner_child", str(root)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "owner ready\n"
        yield child
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@pytest.fixture(scope="session")
def shared_owner_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("shared") / "vectors"
    with owner_process(root):
        yield root


def make_index(adapter: str, tmp_path: Path, shared_root: Path | None = None) -> VectorIndex:
    if adapter == "edge-shared":
        assert shared_root is not None
        return SharedEdgeVectorIndex(shared_root)
    if adapter == "edge":
        return EdgeVectorIndex(tmp_path / "edge", indexing_threshold_kb=EDGE_TEST_INDEXING_THRESHOLD_KB)
    if adapter == "qdrant-memory":
        return QdrantVectorIndex.in_memory()
    if adapter == "qdrant-server":
        return QdrantVectorIndex.from_url(
            os.environ["ENGRAM_QDRANT_URL"], api_key=os.environ.get("ENGRAM_QDRANT_API_KEY") or None
        )
    raise ValueError(adapter)


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def vector_index(adapter: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[VectorIndex]:
    shared = request.getfixturevalue("shared_owner_root") if adapter == "edge-shared" else None
    index = make_index(adapter, tmp_path, shared)
    yield index
    if isinstance(index, SharedEdgeVectorIndex):
        assert not index.owns, "the test process owned the index: the calls did not go through the owner"
    index.close()


@pytest.fixture
def new_name(vector_index: VectorIndex) -> Iterator[Callable[[str], str]]:
    """Unique collection names (a shared server outlives the test); dropped afterwards."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    made: list[str] = []

    def make(suffix: str) -> str:
        name = f"{prefix}_{suffix}"
        made.append(name)
        return name

    yield make
    for name in made:
        if vector_index.collection_exists(name):
            vector_index.drop_collection(name)
