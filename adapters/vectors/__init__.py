"""`VectorIndex` adapters (the `projections.vector_index.VectorIndex` port) and their factory.

- `EdgeVectorIndex`: Qdrant Edge in-process, files under the data directory (the default);
- `QdrantVectorIndex`: a Qdrant server through `qdrant-client` (or its local mode, tests only).
"""

from __future__ import annotations

from pathlib import Path

from engram.adapters.vectors.edge import EdgeVectorIndex
from engram.adapters.vectors.qdrant_server import QdrantVectorIndex
from engram.projections.vector_index import VectorIndex

__all__ = ["EdgeVectorIndex", "QdrantVectorIndex", "build_vector_index"]


def build_vector_index(
    data_dir: Path, *, qdrant_url: str | None, qdrant_api_key: str | None, search_threads: int
) -> VectorIndex:
    """A Qdrant server at `qdrant_url` (`ENGRAM_QDRANT_URL`, with `ENGRAM_QDRANT_API_KEY`) when
    given, else Qdrant Edge under `data_dir/vectors`."""
    if qdrant_url:
        return QdrantVectorIndex.from_url(qdrant_url, api_key=qdrant_api_key or None)
    return EdgeVectorIndex(Path(data_dir) / "vectors", search_threads=search_threads)
