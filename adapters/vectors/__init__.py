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


def _secret(value: Any) -> str | None:
    # Accepts a pydantic SecretStr (how Settings holds keys) or a plain str.
    if value is None:
        return None
    getter = getattr(value, "get_secret_value", None)
    text = str(getter() if callable(getter) else value)
    return text or None


def build_vector_index(settings: Any, data_dir: Path) -> VectorIndex:
    """A Qdrant server when `settings.qdrant_url` is set (`ENGRAM_QDRANT_URL`, with
    `ENGRAM_QDRANT_API_KEY`), else Qdrant Edge under `data_dir/vectors`.

    The settings are read with getattr so that this works before `Settings` declares
    `qdrant_url` / `qdrant_api_key`.
    """
    url = getattr(settings, "qdrant_url", None)
    if url:
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex.from_url(
            str(url), api_key=_secret(getattr(settings, "qdrant_api_key", None))
        )
    return EdgeVectorIndex(
        Path(data_dir) / "vectors",
        search_threads=getattr(settings, "vector_search_threads", 1),
        disk_reserve_bytes=getattr(settings, "vector_disk_reserve_mib", DISK_RESERVE_BYTES // MIB) * MIB,
    )


def __getattr__(name: str) -> Any:
    # qdrant-client takes about a second to import (hundreds of pydantic models): only a deployment
    # with a Qdrant server, and the tests of its adapter, pay for it.
    if name == "QdrantVectorIndex":
        from engram.adapters.vectors.qdrant_server import QdrantVectorIndex

        return QdrantVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
