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


def test_fact_reads_are_scoped_to_a_being_and_its_spaces(engram: Engram) -> None:
    """Issue #11's tenant probe on the facts view: every read of `FactReads` with a being's owners
    returns its own and its spaces' facts, never another being's or a space it is not in (0 leaks)."""
    from uuid import UUID

    from engram.services.commands import FactInput

    ids = {n: UUID(engram.beings.register(n).being_id) for n in ("Ana", "Ben", "Col")}
    engram.spaces.create("crew", ["Ana", "Ben"])
    engram.spaces.create("solo", ["Col"])
    written: dict[str, set[str]] = {}
    for name, space in (("Ana", None), ("Ben", None), ("Col", None), ("Ana", "crew"), ("Col", "solo")):
        fact = FactInput(subject="u", text="shared words", entity_refs=["person:x"], pinned=True)
        w = engram.facts.state(name, fact, space=space)
        written.setdefault(space or name, set()).add(w.fact_id)
        engram.facts.merge_entities(name, "person:y", "person:x", space=space)
    engram.views.ensure()
    reads = engram.views.facts
    allowed = {"Ana": {"Ana", "crew"}, "Ben": {"Ben", "crew"}, "Col": {"Col", "solo"}}
    for name, being_id in ids.items():
        owners = reads.owners(being_id)
        mine = set().union(*(written[o] for o in allowed[name]))
        assert {r["id"] for r in reads.facts(owners, limit=1000)} == mine
        assert {r["id"] for r in reads.pinned(owners)} == mine
        assert {r["fact_id"] for r in reads.facts_with_refs(owners, ["person:x"])} == mine
        for other in set(written) - allowed[name]:
            assert all(reads.fact(owners, f) is None for f in written[other])
        assert {s["name"] for s in reads.spaces_of(being_id)} == allowed[name] - set(ids)
