"""An embedder that remembers its vectors on disk, for benchmarks that embed the same texts again.

LoCoMo's 2,947 turns and 985 questions cost minutes per model on 2 shared cores; the ranking
experiments (docs/recall.md) change what happens after the embedding, not the embedding. Vectors
are keyed by model, role (passage or query) and the text's digest, so a changed text is a miss.
Never used outside `bench/`: the engine's own vectors are in its event log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.domain.embedding import Embedding
from engram.services.embedding_roles import embed_queries
from engram.services.ports import Embedder


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class CachedEmbedder:
    """Wraps `inner`; `save()` writes what was embedded since the start to `directory`."""

    def __init__(self, inner: Embedder, directory: Path) -> None:
        self.inner = inner
        self.directory = directory
        self.misses = 0
        self._vectors: dict[str, dict[str, np.ndarray]] = {}
        for role in ("p", "q"):
            found: dict[str, np.ndarray] = {}
            path = self._path(role)
            if path.exists():
                with np.load(path) as data:
                    found = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
            self._vectors[role] = found

    def _path(self, role: str) -> Path:
        return self.directory / f"{self.inner.model_id}-{role}.npz"

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        return self._embed(texts, "p")

    def embed_query(self, texts: Sequence[str]) -> list[Embedding]:
        return self._embed(texts, "q")

    def _embed(self, texts: Sequence[str], role: str) -> list[Embedding]:
        known = self._vectors[role]
        keys = [_key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in known))
        if missing:
            self.misses += len(missing)
            fresh = self.inner.embed(missing) if role == "p" else embed_queries(self.inner, missing)
            for text, e in zip(missing, fresh, strict=True):
                known[_key(text)] = np.frombuffer(e.data, dtype="<f4").copy()
        if not keys:
            return []
        return rows_to_embeddings(self.model_id, np.stack([known[k] for k in keys]))

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for role, known in self._vectors.items():
            if known:
                keys = np.array(list(known))
                np.savez(self._path(role), keys=keys, vectors=np.stack(list(known.values())))
