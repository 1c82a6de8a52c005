"""The domain of `engram embeddings migrate` (ADR 0071): the deployment's record of its live model,
and `reembed` on an item (another model's vector replaces its own; the same model is no change)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.domain.embedding import Embedding
from engram.domain.embedding_models import EMBEDDING_MODELS_ID, EmbeddingModels
from engram.domain.errors import InvalidTransition
from engram.domain.node import MemoryNode

T = datetime(2026, 11, 27, tzinfo=UTC)


def test_a_migration_starts_once_then_switches() -> None:
    models = EmbeddingModels.register(T)
    assert models.id == EMBEDDING_MODELS_ID and models.live is None
    with pytest.raises(InvalidTransition, match="no migration to b-2"):
        models.switch("b-2", [], T)
    assert models.start_migration("b-2", ["a-3"], T)
    assert not models.start_migration("b-2", ["a-3"], T)  # a resumed run records nothing more
    models.switch("b-2", ["a-3"], T)
    assert models.live == "b-2" and models.migrating is None and models.history == ["b-2"]
    kinds = [type(e).__name__ for e in models.collect_events()]
    assert kinds == ["Registered", "MigrationStarted", "Switched"]


def test_reembedded_is_an_embedded_of_its_own_topic() -> None:
    assert issubclass(MemoryNode.Reembedded, MemoryNode.Embedded)
    assert MemoryNode.Reembedded.TOPIC == "engram.MemoryNode.Reembedded"


def test_reembed_replaces_another_models_vector_only() -> None:
    old = Embedding.from_floats("a-3", [1.0, 0.0, 0.0])
    new = Embedding.from_floats("b-2", [0.0, 1.0])
    node = object.__new__(MemoryNode)
    emitted: list[tuple[type, Embedding]] = []
    node._emit = lambda cls, at, **kw: emitted.append((cls, kw["embedding"]))  # type: ignore[method-assign]
    node.embedding = old
    assert node.reembed(new, T)
    assert emitted == [(MemoryNode.Reembedded, new)]
    node.embedding = new
    assert not node.reembed(Embedding.from_floats("b-2", [1.0, 0.0]), T)
    assert len(emitted) == 1
