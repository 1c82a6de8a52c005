"""`VectorIndex` adapters (the `projections.vector_index.VectorIndex` port) and their factory.

- `SharedEdgeVectorIndex`: Qdrant Edge under the data directory, owned by one process and reached by
  the others through it (the default; ADR 0036);
- `EdgeVectorIndex`: Qdrant Edge in this process only (benchmarks, tests, the owner's engine);
- `QdrantVectorIndex`: a Qdrant server through `qdrant-client` (or its local mode, tests only).

`qdrant-client` takes about a second to import (hundreds of pydantic models): it is imported when
first named, so the embedded default (every CLI command) never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.adapters.storage_full import MIB
from engram.adapters.vectors.edge import DISK_RESERVE_BYTES, EdgeVectorIndex
from engram.adapters.vectors.shared_edge import SharedEdgeVectorIndex, hold_vector_index
from engram.projections.vector_index import VectorIndex

if TYPE_CHECKING:
    from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

__all__ = [
    "EdgeVectorIndex",
    "QdrantVectorIndex",
    "SharedEdgeVectorIndex",
    "build_vector_index",
    "hold_vector_index",
]


def build_vector_index(
    data_dir: Path,
    *,
    qdrant_url: str | None,
    qdrant_api_key: str | None,
    search_threads: int,
    disk_reserve_mib: int = DISK_RESERVE_BYTES // MIB,
) -> VectorIndex:
    """A Qdrant server at `qdrant_url` (`ENGRAM_QDRANT_URL`, with `ENGRAM_QDRANT_API_KEY`) when
    given, else Qdrant Edge under `data_dir/vectors`, shared by the processes of the data directory
    and keeping `disk_reserve_mib` free (ADR 0030)."""
    if qdrant_url:
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex.from_url(qdrant_url, api_key=qdrant_api_key or None)
    return SharedEdgeVectorIndex(
        Path(data_dir) / "vectors", search_threads=search_threads, disk_reserve_bytes=disk_reserve_mib * MIB
    )


def __getattr__(name: str) -> Any:
    if name == "QdrantVectorIndex":
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
