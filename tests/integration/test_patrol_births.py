"""Sub-cluster birth finds the nodes new in a patrol however many others were read or created lately."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.domain.being import Being
from engram.domain.node import MemoryNode, ReactivationSource
from tests.patrol_support import note_scenes, random_scenes, topic_scenes


def _reactivate_all(engram: Any, being_id: UUID, node_ids: list[str]) -> None:
    cycle = engram.store.get(Being, being_id).cycle
    for start in range(0, len(node_ids), 200):
        nodes = [engram.store.get(MemoryNode, UUID(i)) for i in node_ids[start : start + 200]]
        for node in nodes:
            node.reactivate(ReactivationSource.RECALL, cycle, engram.clock.now())
        engram.store.save(*nodes)


def test_birth_sees_new_nodes_behind_many_recent_reads_and_creations(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", random_scenes(40, seed=1))
    engram.patrol("Aria")
    engram.views.ensure()
    old = [n["id"] for n in engram.views.read.nodes(being_id)]
    assert len(old) == 40 and len(engram.views.read.clusters(being_id)) == 2  # no births: unrelated

    # Between patrols the old nodes are read; the next patrol creates the near-duplicates of one
    # topic first and 260 unrelated nodes after them: more than a page (256) of nodes is newer than they.
    _reactivate_all(engram, being_id, old)
    note_scenes(engram, "Aria", [*topic_scenes("chess", 4), *random_scenes(260, seed=2)])
    report = engram.patrol("Aria")

    birth = next(s for s in report.steps if s["step"] == "birth_subclusters")
    assert birth["counts"] == {"subclusters_born": 1, "nodes_moved": 4}
    engram.views.ensure()
    [born] = [c for c in engram.views.read.clusters(being_id) if not c["is_root"]]
    members = engram.views.read.nodes(being_id, cluster_id=UUID(born["id"]))
    base = "Played blitz chess openings versus Tom clubhouse"
    assert sorted(m["action"] for m in members) == sorted(
        f"{base}{v}" for v in ("", " again", " at dawn", " at night")
    )
