"""Rows of one being never appear in another being's queries."""

from __future__ import annotations

import json
from uuid import uuid4

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput


def _populate(e: Engram, name: str) -> tuple[Being, list[MemoryNode]]:
    e.beings.register(name)
    being = e.store.get(Being, Being.register(name, e.clock.now())[0].id)
    root = e.store.get(Cluster, being.business_root_id)
    scene = validate_scene_object(
        {"action": "shared words", "actors": ["me"], "when": ["2026-01-01"], "importance": 0.01}
    )
    nodes = [MemoryNode.create(uuid4(), scene, root, 0, e.clock.now()) for _ in range(3)]
    e.store.save(*nodes)
    e.notes.take(name, NoteInput(kind="todo", text="shared words", tags=["shared"]))
    e.notes.take(
        name, NoteInput(text=json.dumps({"action": "shared", "actors": ["me"], "when": ["2026-01-01"]}))
    )
    e.beings.write_diary(name, "2026-01-01", "shared words")
    return being, nodes


def test_every_query_is_scoped_to_its_being(engram: Engram) -> None:
    aria, aria_nodes = _populate(engram, "Aria")
    bo, bo_nodes = _populate(engram, "Bo")
    engram.views.ensure()
    read = engram.views.read
    for being, mine, theirs in ((aria, aria_nodes, bo_nodes), (bo, bo_nodes, aria_nodes)):
        assert {r["id"] for r in read.nodes(being.id)} == {str(n.id) for n in mine}
        assert {r["id"] for r in read.dying_candidates(being.id, 10)} == {str(n.id) for n in mine}
        assert read.nodes(being.id, ids=[n.id for n in theirs]) == []
        assert all(read.node(being.id, n.id) is None for n in theirs)
        assert {r["being_id"] for r in read.clusters(being.id)} == {str(being.id)}
        assert all(read.cluster(being.id, n.cluster_id) is None for n in theirs)
        assert {r["being_id"] for r in read.notes(being.id)} == {str(being.id)}
        assert len(read.notes(being.id)) == 2
        assert {r["being_id"] for r in read.listed_notes(being.id, tags=["shared"])} == {str(being.id)}
        assert len(read.listed_notes(being.id)) == 2
        assert [d["being_id"] for d in read.diary(being.id)] == [str(being.id)]
        assert read.revivable(being.id) == []
