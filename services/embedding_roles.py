"""Queries and passages: embedders that embed a search differently from what they store.

Some models (E5, ADR 0080) are trained with a prefix that says which side a text is on. Such an
embedder has `embed_query` besides the port's `embed`; every query path embeds through
`embed_queries`, so that a symmetric embedder (MiniLM, OpenAI, hashing) needs nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from engram.domain.embedding import Embedding
from engram.services.ports import Embedder


@runtime_checkable
class QueryEmbedder(Protocol):
    def embed_query(self, texts: Sequence[str]) -> list[Embedding]: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[Embedding]:
    """The texts embedded as searches: `embed_query` where the embedder has it, else `embed`."""
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_query(texts)
    return embedder.embed(texts)
