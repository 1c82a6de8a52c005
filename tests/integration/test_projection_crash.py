"""A projection process SIGKILLed in the middle of a batch loses no event and applies none twice."""

from __future__ import annotations

from uuid import uuid4

from engram.domain.being import Being
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.services.bootstrap import bootstrap
from tests.support import SeededIds, SteppingClock, sigkill_after_batches

NODES = 6000
CHILD = "tests.integration.crash_child"


def test_sigkill_mid_batch_loses_nothing_and_applies_nothing_twice(make_settings) -> None:
    settings = make_settings()
    e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())
    try:
        being, business, private = Being.register("Aria", e.clock.now())
        e.store.save(being, business, private)
        scene = validate_scene_object({"action": "x", "actors": ["me"], "when": ["2026-01-01"]})
        for _ in range(0, NODES, 200):
            e.store.save(*[MemoryNode.create(uuid4(), scene, business, 0, e.clock.now()) for _ in range(200)])
        head = e.store.head()

        first = sigkill_after_batches(CHILD, settings, 3, "150")
        second = sigkill_after_batches(CHILD, settings, 5, "150")
        assert first >= 3 and second >= 5
        status = engine.status(e.views.dbs["memory"], e.views.projections["memory"])
        assert 0 < status.position < head, "the kills must land while work remains"

        e.views.ensure()
        read = e.views.read
        root = read.cluster(being.id, business.id)
        assert root is not None
        assert (root["total_count"], root["active_count"]) == (NODES, NODES)
        assert len(read.nodes(being.id)) == NODES
        assert e.views.positions(["memory"]) == {"memory": head}
    finally:
        e.close()
