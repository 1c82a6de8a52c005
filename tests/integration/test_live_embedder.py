"""After `engram embeddings migrate` the log's live model embeds the queries (#13, ADR 0079), on both
backends: a deployment whose configuration still names the old model searches with the new one, says
that the configured one is ignored, and no longer warns of a mismatch; a live model that cannot be
built here is refused with a clear message and nothing written."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from structlog.testing import capture_logs

from engram.adapters.embedders import EmbedderConfigError
from engram.adapters.embedders.hashing import HashingEmbedder
from engram.domain.embedding_models import EMBEDDING_MODELS_ID, EmbeddingModels
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.embedder_check import embedder_mismatch
from engram.services.embedding_migration import EmbeddingMigration
from tests.patrol_support import topic_scenes
from tests.support import SeededIds, SteppingClock

OLD, NEW = "hashing-384", "hashing-64"


@pytest.fixture
def world(make_settings: Callable[..., Settings], clock: SteppingClock) -> Iterator[Engram]:
    """Aria with 6 nodes of the configured hashing-384 model."""
    e = bootstrap(make_settings(), clock=clock, ids=SeededIds())
    e.beings.register("Aria")
    for text in topic_scenes("baking", 3) + topic_scenes("climbing", 3):
        e.notes.take("Aria", NoteInput(text=text))
    e.patrol("Aria")
    yield e
    e.close()


def test_after_a_migration_the_old_configuration_searches_with_the_new_model(
    world: Engram, make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    report = EmbeddingMigration(world, HashingEmbedder(dim=64)).run()
    assert report.switched and report.position is not None
    world.close()
    # A fresh process, its configuration still the old model's (ENGRAM_EMBEDDER=hashing: hashing-384).
    with bootstrap(make_settings(), clock=clock, ids=SeededIds()) as e, capture_logs() as logs:
        assert e.embedder.model_id == NEW
        assert embedder_mismatch(e) is None
        recalled = e.reading.recall("Aria", "Baked rye sourdough loaves in the kitchen oven")
        assert recalled.nodes and all("rye" in n.action.lower() for n in recalled.nodes)
    [warning] = [entry for entry in logs if entry["event"] == "configured_embedder_ignored"]
    assert warning["log_level"] == "warning"
    assert (warning["configured"], warning["live"], warning["since"]) == (OLD, NEW, report.position)
    assert f"since position {report.position}" in warning["message"]


def test_a_deployment_that_never_migrated_uses_the_configured_embedder(world: Engram) -> None:
    with capture_logs() as logs:
        assert world.embedder.model_id == OLD
    assert not [entry for entry in logs if entry["event"] == "configured_embedder_ignored"]


def test_a_live_model_that_cannot_be_built_here_is_refused(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ENGRAM_OPENAI_API_KEY", "OPENAI_API_KEY", "ENGRAM_OPENAI_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with bootstrap(make_settings(), clock=clock, ids=SeededIds()) as e:
        models = EmbeddingModels.register(clock.now())
        models.start_migration("openai:text-embedding-3-large", [OLD], clock.now())
        models.switch("openai:text-embedding-3-large", [OLD], clock.now())
        position = e.store.save(models)
    with bootstrap(make_settings(), clock=clock, ids=SeededIds()) as e:
        head = e.store.head()
        with pytest.raises(EmbedderConfigError) as caught:
            _ = e.embedder
        assert e.store.head() == head
        assert e.store.find(EmbeddingModels, EMBEDDING_MODELS_ID) is not None
    message = caught.value.message
    assert "openai:text-embedding-3-large" in message and f"since position {position}" in message
    assert "cannot build it" in message and "ENGRAM_OPENAI_API_KEY" in message
