"""`engram embeddings migrate` (#13, ADR 0071) on both backends: every node, note and fact re-embedded
from the log with another model into collections beside the live ones, resumable after a stop, then
the switch that drops the old collections; a rebuild after it gives the same collections."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import pytest

from engram.adapters.embedders.hashing import HashingEmbedder
from engram.domain.embedding_models import EMBEDDING_MODELS_ID, EmbeddingModels
from engram.domain.ids import being_id_for_name
from engram.projections.fact_search import facts_alias
from engram.projections.note_search import notes_alias
from engram.projections.vectors import centroids_alias, nodes_alias
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput, NoteInput
from engram.services.config import Settings
from engram.services.embedder_check import embedder_mismatch
from engram.services.embedding_migration import EmbeddingMigration
from tests.integration.orphan_child import index_factory
from tests.patrol_support import topic_scenes
from tests.support import ROOT, SeededIds, SteppingClock, settings_json

OLD, NEW = "hashing-384", "hashing-64"
ARIA = being_id_for_name("Aria")


@pytest.fixture
def world(make_settings: Callable[..., Settings], clock: SteppingClock) -> Iterator[Engram]:
    """Aria with 6 nodes, 3 embedded notes and 2 embedded facts, all of the hashing-384 model."""
    e = bootstrap(make_settings(), clock=clock, ids=SeededIds())
    e.beings.register("Aria")
    for text in topic_scenes("baking", 3) + topic_scenes("climbing", 3):
        e.notes.take("Aria", NoteInput(text=text))
    e.patrol("Aria")
    for text in ("The garage door code is 4321", "Mina likes green tea", "The boiler is serviced in May"):
        e.notes.take("Aria", NoteInput(kind="knowledge", text=text))
    e.packing.embed_notes(ARIA)
    for text in ("Mina works in her garden", "Mina plays the cello"):
        e.facts.state("Aria", FactInput(text=text, subject="mina"))
    e.fact_search.embed_facts([str(ARIA)], 10)
    yield e
    e.close()


def _migration(e: Engram) -> EmbeddingMigration:
    return EmbeddingMigration(e, HashingEmbedder(dim=64))


def test_dry_run_counts_and_writes_nothing(world: Engram) -> None:
    head = world.store.head()
    report = _migration(world).dry_run()
    assert report.pending == {"node": 6, "note": 3, "fact": 2}
    assert report.estimate_s is not None and report.estimate_s >= 0
    assert world.store.head() == head
    assert world.views.vectors.index.resolve_alias(nodes_alias(NEW)) is None


def test_stopped_half_way_then_resumed_then_switched(world: Engram) -> None:
    index = world.views.vectors.index
    first = _migration(world).run(stop_after=4, batch=2)
    assert first.done == {"node": 4, "note": 0, "fact": 0} and not first.switched
    # The new collections fill beside the live ones, which still serve the configured model.
    assert index.count(nodes_alias(NEW)) == 4
    assert index.resolve_alias(nodes_alias(OLD)) is not None
    assert embedder_mismatch(world) is not None  # 2 nodes are still of the old model
    recalled = world.reading.recall(
        "Aria", "Baked rye sourdough loaves in the kitchen oven"
    )  # the configured (old) model still finds
    assert recalled.nodes
    models = world.store.get(EmbeddingModels, EMBEDDING_MODELS_ID)
    assert models.migrating == NEW and models.live is None

    second = _migration(world).run()
    assert second.pending == {"node": 2, "note": 3, "fact": 2}  # what the first run left, no more
    assert second.done == second.pending and second.switched and second.dropped == [OLD]
    assert _migration(world).pending() == {"node": [], "note": [], "fact": []}
    for alias in (nodes_alias(OLD), centroids_alias(OLD), notes_alias(OLD), facts_alias(OLD)):
        assert index.resolve_alias(alias) is None, alias
    assert not [c for c in index.list_collections() if "hashing_384" in c]
    assert index.count(nodes_alias(NEW)) == 6
    assert index.count(notes_alias(NEW)) == 3
    assert index.count(facts_alias(NEW)) == 2
    assert index.count(centroids_alias(NEW)) > 0
    models = world.store.get(EmbeddingModels, EMBEDDING_MODELS_ID)
    assert models.live == NEW and models.migrating is None
    # Every event of the items is of the log: a third run finds nothing to do and records nothing.
    head = world.store.head()
    third = _migration(world).run()
    assert third.total == 0 and not third.switched and world.store.head() == head


def test_after_the_switch_the_new_model_searches_and_no_warning(
    world: Engram, make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    _migration(world).run()
    world.close()
    with bootstrap(make_settings(), clock=clock, ids=SeededIds(), embedder=HashingEmbedder(dim=64)) as e:
        assert embedder_mismatch(e) is None
        assert e.views.read.vector_models("nodes") == [NEW]
        recalled = e.reading.recall("Aria", "Baked rye sourdough loaves in the kitchen oven")
        assert recalled.nodes and all("rye" in n.action.lower() for n in recalled.nodes)
        packed = e.packing.pack("Aria", query="garage door code")
        assert any("4321" in n.text for n in packed.notes)
        [hit, *_] = e.fact_search.search("Aria", "garden").hits
        assert "garden" in hit.text and hit.parts["semantic"] > 0


def test_a_rebuild_after_the_switch_gives_the_same_collections(world: Engram) -> None:
    _migration(world).run(stop_after=3)
    _migration(world).run()
    index = world.views.vectors.index
    before = {
        a: index.count(a)
        for a in (nodes_alias(NEW), centroids_alias(NEW), notes_alias(NEW), facts_alias(NEW))
    }
    world.views.rebuild_all(["vectors", "note_search", "fact_search"])
    after = {a: index.count(a) for a in before}
    assert after == before
    assert world.views.read.vector_models("nodes") == [NEW]
    for alias in (nodes_alias(OLD), notes_alias(OLD), facts_alias(OLD)):
        assert index.resolve_alias(alias) is None, alias


def test_migrating_to_the_live_model_does_nothing(world: Engram) -> None:
    head = world.store.head()
    report = EmbeddingMigration(world, HashingEmbedder()).run()
    assert report.total == 0 and not report.switched
    assert world.store.head() == head
    assert UUID(int=0) != ARIA


def test_killed_mid_migration_then_run_again(
    world: Engram, make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    world.close()  # the child owns the data directory while it runs
    child = subprocess.run(
        [sys.executable, "-m", "tests.integration.migrate_kill_child", settings_json(make_settings())],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert child.stdout.splitlines()[-1] == "node 2/6"
    with bootstrap(make_settings(), clock=clock, ids=SeededIds()) as e:
        migration = _migration(e)
        assert {k: len(v) for k, v in migration.pending().items()} == {"node": 4, "note": 3, "fact": 2}
        report = migration.run()
        assert report.done == {"node": 4, "note": 3, "fact": 2} and report.switched
        assert e.views.vectors.index.count(nodes_alias(NEW)) == 6
        assert e.views.vectors.index.resolve_alias(nodes_alias(OLD)) is None


def test_on_the_qdrant_client_adapter(tmp_path: Path, clock: SteppingClock) -> None:
    """The same migration on `qdrant-client` (local mode stands for a Qdrant server): it uses only
    the port's operations the contract suite checks on every adapter (an alias goes with its
    collection)."""
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    with bootstrap(
        settings, clock=clock, ids=SeededIds(), vector_index=index_factory("qdrant", tmp_path / "qdrant")
    ) as e:
        e.beings.register("Aria")
        for text in topic_scenes("baking", 3):
            e.notes.take("Aria", NoteInput(text=text))
        e.patrol("Aria")
        assert _migration(e).run(stop_after=1).done["node"] == 1
        report = _migration(e).run()
        assert report.switched and report.done["node"] == 2
        index = e.views.vectors.index
        assert index.count(nodes_alias(NEW)) == 3 and index.resolve_alias(nodes_alias(OLD)) is None
        assert not [c for c in index.list_collections() if "hashing_384" in c]
