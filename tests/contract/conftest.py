"""Fixtures for the `VectorIndex` contract suite: one `vector_index` per adapter.

The parameter list is built at import time: the real-server parameter exists only when
`ENGRAM_QDRANT_URL` is set, so nothing is skipped silently and a run's test ids say which
adapters it covered.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engram.adapters.vectors import EdgeVectorIndex, QdrantVectorIndex
from engram.projections.vector_index import VectorIndex

# Edge's default indexing threshold (10 MB) would leave the suite's tiny collections unindexed,
# so `optimize()` would do nothing; 1 KB makes it really build HNSW.
EDGE_TEST_INDEXING_THRESHOLD_KB = 1

ADAPTERS: list[str] = ["edge", "qdrant-memory"]
if os.environ.get("ENGRAM_QDRANT_URL"):
    ADAPTERS.append("qdrant-server")


def make_index(adapter: str, tmp_path: Path) -> VectorIndex:
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
def vector_index(adapter: str, tmp_path: Path) -> Iterator[VectorIndex]:
    index = make_index(adapter, tmp_path)
    yield index
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
