"""`VectorIndex` adapters (the `projections.vector_index.VectorIndex` port) and their factory.

- `SharedEdgeVectorIndex`: Qdrant Edge under the data directory, owned by one process and reached by
  the others through it (the default; ADR 0025);
- `EdgeVectorIndex`: Qdrant Edge in this process only (benchmarks, tests, the owner's engine);
- `QdrantVectorIndex`: a Qdrant server through `qdrant-client` (or its local mode, tests only).

`qdrant-client` takes seconds to import: it is imported when first named, so the embedded default
(every CLI command) never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.adapters.vectors.edge import EdgeVectorIndex
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


def __getattr__(name: str) -> Any:
    if name == "QdrantVectorIndex":
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _secret(value: Any) -> str | None:
    # Accepts a pydantic SecretStr (how Settings holds keys) or a plain str.
    if value is None:
        return None
    getter = getattr(value, "get_secret_value", None)
    text = str(getter() if callable(getter) else value)
    return text or None


def build_vector_index(settings: Any, data_dir: Path) -> VectorIndex:
    """A Qdrant server when `settings.qdrant_url` is set (`ENGRAM_QDRANT_URL`, with
    `ENGRAM_QDRANT_API_KEY`), else Qdrant Edge under `data_dir/vectors`, shared by the processes of
    the data directory.

    The settings are read with getattr so that this works before `Settings` declares
    `qdrant_url` / `qdrant_api_key`.
    """
    url = getattr(settings, "qdrant_url", None)
    if url:
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex.from_url(
            str(url), api_key=_secret(getattr(settings, "qdrant_api_key", None))
        )
    return SharedEdgeVectorIndex(
        Path(data_dir) / "vectors", search_threads=getattr(settings, "vector_search_threads", 1)
    )
