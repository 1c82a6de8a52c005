"""A rebuild SIGKILLed while it fills its generation leaves the serving one intact; the next rebuild
drops the half-built generation and switches to a complete one."""

from __future__ import annotations

from uuid import uuid4

from engram.domain.being import Being
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.services.bootstrap import bootstrap
from tests.support import SeededIds, SteppingClock, sigkill_after_batches

NODES = 3000


def test_sigkill_mid_rebuild_keeps_the_serving_generation_and_the_next_rebuild_completes(
    make_settings,
) -> None:
    settings = make_settings()
    e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())
    try:
        being, business, private = Being.register("Aria", e.clock.now())
        e.store.save(being, business, private)
        scene = validate_scene_object({"action": "fed the cat", "actors": ["me"], "when": ["2026-01-01"]})
        for _ in range(0, NODES, 200):
            e.store.save(*[MemoryNode.create(uuid4(), scene, business, 0, e.clock.now()) for _ in range(200)])
        e.views.ensure()
        head = e.store.head()
        db, projection = e.views.dbs["memory"], e.views.projections["memory"]

        # SIGKILL after 3 batches: it lands in the bulk phase, before the indexes.
        batches = sigkill_after_batches("tests.integration.rebuild_crash_child", settings, 3, "150")
        assert batches >= 3

        status = engine.status(db, projection)
        assert status.generation == 1 and status.position == head
        assert 2 in status.building and 0 < status.building[2] < head, status.building
        read, search = e.views.read, e.views.search
        assert len(read.nodes(being.id)) == NODES
        assert len(search.lexical(being.id, "cat", 5)) == 5  # the full-text index still serves

        assert e.views.rebuild("memory") == 3
        status = engine.status(db, projection)
        assert (status.generation, status.position, status.building) == (3, head, {})
        root = read.cluster(being.id, business.id)
        assert root is not None and (root["total_count"], root["active_count"]) == (NODES, NODES)
        assert len(read.nodes(being.id)) == NODES
        assert len(search.lexical(being.id, "cat", 5)) == 5  # built after the bulk load
    finally:
        e.close()
