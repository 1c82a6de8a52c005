"""`VectorIndex` adapters (the `projections.vector_index.VectorIndex` port) and their factory.

- `EdgeVectorIndex`: Qdrant Edge in-process, files under the data directory (the default);
- `QdrantVectorIndex`: a Qdrant server through `qdrant-client` (or its local mode, tests only).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.adapters.storage_full import MIB
from engram.adapters.vectors.edge import DISK_RESERVE_BYTES, EdgeVectorIndex
from engram.projections.vector_index import VectorIndex

if TYPE_CHECKING:
    from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

__all__ = ["EdgeVectorIndex", "QdrantVectorIndex", "build_vector_index"]


def build_vector_index(
    data_dir: Path,
    *,
    qdrant_url: str | None,
    qdrant_api_key: str | None,
    search_threads: int,
    disk_reserve_mib: int = DISK_RESERVE_BYTES // MIB,
) -> VectorIndex:
    """A Qdrant server at `qdrant_url` (`ENGRAM_QDRANT_URL`, with `ENGRAM_QDRANT_API_KEY`) when
    given, else Qdrant Edge under `data_dir/vectors` keeping `disk_reserve_mib` free (ADR 0030)."""
    if qdrant_url:
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex.from_url(qdrant_url, api_key=qdrant_api_key or None)
    return EdgeVectorIndex(
        Path(data_dir) / "vectors", search_threads=search_threads, disk_reserve_bytes=disk_reserve_mib * MIB
    )


def __getattr__(name: str) -> Any:
    # qdrant-client takes about a second to import (hundreds of pydantic models): only a deployment
    # with a Qdrant server, and the tests of its adapter, pay for it.
    if name == "QdrantVectorIndex":
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
