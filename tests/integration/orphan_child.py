"""Child process for the orphan-collection tests: rebuilds the vectors view and SIGKILLs itself right
after the new generation's first vector collection exists, before the batch that records it commits."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from engram.projections.vector_index import VectorIndex
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings


def index_factory(adapter: str, path: Path) -> Callable[[], VectorIndex] | None:
    """The vector index of the orphan tests: Qdrant Edge (the deployment's default) or qdrant-client's
    local mode on disk (what stands for a Qdrant server here)."""
    if adapter == "edge":
        return None
    from qdrant_client import QdrantClient

    from engram.adapters.vectors import QdrantVectorIndex

    return lambda: QdrantVectorIndex(QdrantClient(path=str(path)), owns_client=True)


def main() -> None:
    settings = Settings.model_validate_json(sys.argv[1])
    e = bootstrap(settings, vector_index=index_factory(sys.argv[2], Path(sys.argv[3])))
    index = e.views.vector_index
    create = index.ensure_collection

    def create_then_die(name: str, dim: int) -> None:
        create(name, dim)
        print(f"created {name}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    index.ensure_collection = create_then_die  # type: ignore[method-assign]
    e.views.rebuild("vectors")
    print("done", flush=True)


if __name__ == "__main__":
    main()
