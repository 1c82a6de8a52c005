"""Noticing that the configured embedder is not the one the stored vectors were made with (#7, item 14).

Each node's `Embedded` event names its model, and the vectors view keeps one collection per model. A
vector from one model means nothing to another, so after a change of embedder `recall` and `query`
no longer find the nodes embedded before it by meaning: every edge says so (the CLI's reading and
patrol commands, `/v1/health`, the worker's log), and names `engram embeddings migrate` (ADR 0071),
which re-embeds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EmbedderMismatch:
    configured: str
    stored: tuple[str, ...]
    """Models that made some of the stored node vectors, other than the configured one."""
    configured_has_vectors: bool

    def message(self) -> str:
        made = ", ".join(f"{m} ({setting_for(m)})" for m in self.stored)
        some = "some of the node vectors were" if self.configured_has_vectors else "the node vectors were"
        return (
            f"{some} made with {made}, but the configured embedder is {self.configured}: recall and query "
            f"cannot find those nodes by meaning. Set the embedder back ({setting_for(self.stored[0])}) to "
            "find them again, or re-embed them with the configured one: engram embeddings migrate --to "
            f"{migrate_target(self.configured)}"
        )


def embedder_mismatch(engram: Any) -> EmbedderMismatch | None:
    """The mismatch between `engram`'s embedder and its stored node vectors, or None."""
    stored = engram.views.read.vector_models("nodes")
    configured = engram.embedder.model_id
    others = tuple(m for m in stored if m != configured)
    if not others:
        return None
    return EmbedderMismatch(configured, others, configured in stored)


def setting_for(model_id: str) -> str:
    """The settings that choose the embedder with this model id."""
    if model_id.startswith("minilm"):
        return "ENGRAM_EMBEDDER=offline"
    if model_id.startswith("e5-small"):
        return "ENGRAM_EMBEDDER=e5-small"
    if model_id.startswith("hashing"):
        return "ENGRAM_EMBEDDER=hashing"
    if model_id.startswith("openai:"):
        return f"ENGRAM_EMBEDDER=openai, ENGRAM_EMBEDDING_MODEL={model_id.removeprefix('openai:')}"
    return f"the embedder of model {model_id}"


def migrate_target(model_id: str) -> str:
    """The `engram embeddings migrate --to` value that gives vectors of this model id."""
    if model_id.startswith("minilm"):
        return "offline"
    if model_id.startswith("e5-small"):
        return "e5-small"
    if model_id.startswith("hashing-"):
        dim = model_id.removeprefix("hashing-")
        return "hashing" if dim == "384" else f"hashing:{dim}"
    return model_id  # `openai:MODEL`
