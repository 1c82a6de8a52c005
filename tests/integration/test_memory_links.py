"""A-MEM links as dreaming steps on every backend (issue #12, ADR 0062): found once with their
scores, the threshold kept, only the being's own memories, removed when an end dies or is archived,
read from both ends."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import numpy as np
import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import InvalidInput
from engram.domain.fact import Fact, FactContent
from engram.domain.links import MemoryLinks, links_id_for
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.memory_links import LinkCleanupStep, LinksStep
from tests.support import SeededIds, SteppingClock

MODEL = "m"


def _vec(angle_deg: float) -> Embedding:
    """A unit vector in a plane: two of them are alike by the cosine of their angle."""
    a = math.radians(angle_deg)
    return Embedding.from_floats(MODEL, [math.cos(a), math.sin(a), 0.0, 0.0])


def _being(engram: Engram, name: str) -> tuple[Being, Cluster]:
    being, business, private = Being.register(name, engram.clock.now())
    engram.store.save(being, business, private)
    return being, business


def _node(
    engram: Engram,
    root: Cluster,
    angle: float,
    importance: float = 0.5,
    text: str | None = None,
    expires_at: datetime | None = None,
) -> MemoryNode:
    action = text or f"scene at {angle}"
    scene = validate_scene_object(
        {"action": action, "actors": ["me"], "when": ["2026-05-02"], "importance": importance}
    )
    node = MemoryNode.create(uuid4(), scene, root, 0, engram.clock.now(), expires_at=expires_at)
    node.embed(_vec(angle), engram.clock.now())
    engram.store.save(node)
    return node


def _fact(engram: Engram, being: Being, angle: float) -> Fact:
    fact = Fact.state(
        uuid4(), being.id, "being", being.id, FactContent(f"fact at {angle}", "mina"), engram.clock.now()
    )
    fact.embed(_vec(angle), engram.clock.now())
    engram.store.save(fact)
    return fact


def _steps(engram: Engram, **kw: Any) -> tuple[LinksStep, LinkCleanupStep]:
    steps = (LinksStep(engram, **kw), LinkCleanupStep(engram))
    engram.__dict__["dream_steps"] = list(steps)
    return steps


def _pairs(engram: Engram, being: Being) -> dict[frozenset[str], float]:
    report = engram.links.links(str(being.id))
    return {frozenset({link.memory_id, link.other_id}): link.score for link in report.links}


def test_links_are_found_once_with_their_scores_at_the_threshold_and_read_from_both_ends(
    engram: Engram,
) -> None:
    being, root = _being(engram, "Ada")
    _steps(engram)
    a = _node(engram, root, 0)
    b = _node(engram, root, 40)  # cos 40° = 0.766: linked to a
    c = _node(engram, root, 90)  # cos 50° = 0.643 to b: not linked
    f = _fact(engram, being, 10)  # cos 10° = 0.985 to a, 30° = 0.866 to b

    report = engram.sleep.dream("Ada")

    assert report.did["links"] == 4
    pairs = _pairs(engram, being)
    ab, af, bf = (frozenset({str(x.id), str(y.id)}) for x, y in ((a, b), (a, f), (b, f)))
    assert set(pairs) == {ab, af, bf}
    assert pairs[ab] == pytest.approx(math.cos(math.radians(40)), abs=1e-5)
    assert pairs[af] == pytest.approx(math.cos(math.radians(10)), abs=1e-5)
    assert all(score >= 0.7 for score in pairs.values())
    of_b = engram.links.links(str(being.id), memory_id=str(b.id)).links
    assert {link.other_id for link in of_b} == {str(a.id), str(f.id)}  # from b's end, recorded by a
    assert engram.links.links(str(being.id), memory_id=str(c.id)).links == []
    processed = engram.store.get(MemoryLinks, links_id_for(being.id, c.id))
    assert processed.links == [] and processed.threshold == 0.7  # processed, with nothing alike


def test_a_tick_run_again_writes_nothing_twice(engram: Engram) -> None:
    being, root = _being(engram, "Ada")
    links, _ = _steps(engram)
    a, b = _node(engram, root, 0), _node(engram, root, 20)
    engram.sleep.dream("Ada")
    # A tick killed after its save but before the view caught up reads the memories as pending
    # again: the aggregates are there, nothing is written.
    engram.views.ensure()
    again = engram.sleep.dream("Ada")
    assert again.did.get("links", 0) == 0
    assert links.pending(being.id) == 0
    events = list(engram.store.log.app.repository.event_store.get(links_id_for(being.id, b.id)))
    assert len(events) == 1
    assert len(_pairs(engram, being)) == 1 and frozenset({str(a.id), str(b.id)}) in _pairs(engram, being)


def test_only_the_beings_own_memories_are_linked(engram: Engram) -> None:
    ada, ada_root = _being(engram, "Ada")
    bo, bo_root = _being(engram, "Bo")
    _steps(engram)
    mine = _node(engram, ada_root, 0)
    _node(engram, bo_root, 1)  # almost the same vector, another being's
    _fact(engram, bo, 2)
    engram.sleep.dream("Ada")
    engram.sleep.dream("Bo")
    assert engram.links.links(str(ada.id), memory_id=str(mine.id)).links == []
    assert len(_pairs(engram, bo)) == 1


def test_links_go_when_a_node_dies_or_a_fact_is_archived_with_the_reason(engram: Engram) -> None:
    being, root = _being(engram, "Ada")
    _steps(engram)
    a, b = _node(engram, root, 0, importance=0.0), _node(engram, root, 10)
    f = _fact(engram, being, 5)
    engram.sleep.dream("Ada")
    assert len(_pairs(engram, being)) == 3

    node = engram.store.get(MemoryNode, a.id)
    node.flag_dying(1000, engram.clock.now())
    node.make_dead(1000, "faded", engram.clock.now())
    fact = engram.store.get(Fact, f.id)
    fact.archive(engram.clock.now())
    engram.store.save(node, fact)
    report = engram.sleep.dream("Ada")

    assert report.did["link_cleanup"] == 3
    assert _pairs(engram, being) == {}
    reasons = {
        e.reason
        for owner in (a, b, f)
        for e in engram.store.log.app.repository.event_store.get(links_id_for(being.id, owner.id))
        if isinstance(e, MemoryLinks.Unlinked)
    }
    assert reasons == {"died", "archived"}
    assert engram.sleep.dream("Ada").did.get("link_cleanup", 0) == 0


def test_links_go_when_a_memory_expires(engram: Engram, clock: SteppingClock) -> None:
    being, root = _being(engram, "Ada")
    _steps(engram)
    soon = _node(engram, root, 0, expires_at=clock.current + timedelta(hours=1))
    stays = _node(engram, root, 10)
    engram.sleep.dream("Ada")
    assert len(_pairs(engram, being)) == 1
    clock.current += timedelta(hours=2)
    assert engram.sleep.dream("Ada").did["link_cleanup"] == 1
    assert _pairs(engram, being) == {}
    [event] = [
        e
        for e in engram.store.log.app.repository.event_store.get(links_id_for(being.id, soon.id))
        if isinstance(e, MemoryLinks.Unlinked)
    ]
    assert event.reason == "expired" and event.other_ids == [str(stays.id)]


def test_the_threshold_is_kept_and_a_lower_one_links_more(engram: Engram) -> None:
    being, root = _being(engram, "Ada")
    _steps(engram, threshold=0.9)
    _node(engram, root, 0)
    _node(engram, root, 30)  # cos 30° = 0.866 < 0.9
    engram.sleep.dream("Ada")
    assert _pairs(engram, being) == {}
    with pytest.raises(InvalidInput):
        MemoryLinks.link(
            being.id,
            uuid4(),
            "node",
            [{"id": str(uuid4()), "kind": "node", "score": 0.5}],
            threshold=0.7,
            model=MODEL,
            at=engram.clock.now(),
        )


def test_bad_reads_are_refused_by_field(engram: Engram) -> None:
    _being(engram, "Ada")
    with pytest.raises(InvalidInput) as bad:
        engram.links.links("Ada", memory_id="not-a-uuid")
    assert bad.value.details["field"] == "node"
    with pytest.raises(InvalidInput) as bad:
        engram.links.links("Ada", limit=0)
    assert bad.value.details["field"] == "limit"


def test_the_links_view_rebuilds_from_the_log(engram: Engram) -> None:
    being, root = _being(engram, "Ada")
    _steps(engram)
    _node(engram, root, 0)
    _node(engram, root, 10)
    engram.sleep.dream("Ada")
    before = _pairs(engram, being)
    engram.views.rebuild("links")
    assert _pairs(engram, being) == before and len(before) == 1


def test_engram_links_lists_them_with_their_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    e = bootstrap(
        Settings(data_dir=data, embedder="hashing", llm="none"), clock=SteppingClock(), ids=SeededIds()
    )
    try:
        _, root = _being(e, "Ada")
        a = _node(e, root, 0, text="planted tomatoes")
        b = _node(e, root, 20, text="a zebra finch sang")
    finally:
        e.close()
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    runner = CliRunner()
    dreamt = runner.invoke(cli, ["dream", "Ada"], catch_exceptions=False)
    assert dreamt.exit_code == 0 and "links 2" in dreamt.stdout
    listed = runner.invoke(cli, ["links", "Ada"], catch_exceptions=False)
    assert listed.exit_code == 0
    assert listed.stdout.strip() == f"0.940  node {a.id}  —  node {b.id}"
    one = runner.invoke(cli, ["links", "Ada", "--node", str(a.id), "--json"], catch_exceptions=False)
    [link] = json.loads(one.stdout)["links"]
    assert link["memory_id"] == str(a.id) and link["other_id"] == str(b.id)
    assert link["score"] == pytest.approx(math.cos(math.radians(20)), abs=1e-5)
    explained = runner.invoke(
        cli, ["query", "Ada", "tomatoes", "--profile", "lexical", "--links", "--explain", "--no-reactivate"]
    )
    assert explained.exit_code == 0 and f"linked from {a.id} (cosine 0.940)" in explained.stdout
    bad = runner.invoke(cli, ["links", "Ada", "--node", "x"])
    assert bad.exit_code != 0 and "node" in bad.stderr


def test_query_follows_links_one_hop_when_asked_and_shows_the_hop(engram: Engram) -> None:
    _, root = _being(engram, "Ada")
    _steps(engram)
    a = _node(engram, root, 0, text="planted tomatoes in the greenhouse")
    b = _node(engram, root, 25, text="the zebra finch sang at dawn")  # no word of the query
    _node(engram, root, 90, text="read a book about tomatoes")  # a hit, linked to nothing
    engram.sleep.dream("Ada")

    plain = engram.reading.query("Ada", "tomatoes", k=5, profile_name="lexical", reactivate=False)
    assert str(b.id) not in [n.id for n in plain.nodes] and all(n.via is None for n in plain.nodes)
    assert "via" not in plain.model_dump()["nodes"][0]  # the field appears only on a hop

    found = engram.reading.query("Ada", "tomatoes", k=5, profile_name="lexical", reactivate=False, links=True)
    ids = [n.id for n in found.nodes]
    assert str(b.id) in ids and ids.index(str(b.id)) == ids.index(str(a.id)) + 1
    hop = found.nodes[ids.index(str(b.id))].via
    assert hop is not None and hop.linked_from == str(a.id)
    assert hop.link_score == pytest.approx(math.cos(math.radians(25)), abs=1e-5)
    assert len(found.nodes) == len(plain.nodes) + 1
    one = engram.reading.query("Ada", "tomatoes", k=1, profile_name="lexical", reactivate=False, links=True)
    assert len(one.nodes) == 1  # k holds: the hop pushes the last hits out


def test_recall_follows_links_one_hop_when_asked(engram: Engram) -> None:
    """`a` is recalled (cosine 0.5 to the query); `b`, linked to `a` (cos 40° = 0.77), is not
    (cos 100° to the query) unless recall follows the link."""
    _, root = _being(engram, "Ada")
    _steps(engram)
    model, dim = engram.embedder.model_id, engram.embedder.dim
    q, u = np.zeros(dim, dtype=np.float32), np.zeros(dim, dtype=np.float32)
    q[0], u[1] = 1.0, 1.0

    def at(angle: float) -> Embedding:
        v = math.cos(math.radians(angle)) * q + math.sin(math.radians(angle)) * u
        return Embedding.from_floats(model, [float(x) for x in v])

    nodes = []
    for angle, text in ((60, "the allotment"), (100, "a zebra finch")):
        scene = validate_scene_object({"action": text, "actors": ["me"], "when": ["2026-05-02"]})
        node = MemoryNode.create(uuid4(), scene, root, 0, engram.clock.now())
        node.embed(at(angle), engram.clock.now())
        nodes.append(node)
    engram.store.save(*nodes)
    a, b = nodes
    engram.sleep.dream("Ada")

    plain = engram.reading.recall("Ada", "my allotment", vector=q, links=False)
    assert [n.id for n in plain.nodes] == [str(a.id)]
    linked = engram.reading.recall("Ada", "my allotment", vector=q, links=True)
    assert [n.id for n in linked.nodes] == [str(a.id), str(b.id)]
    hop = linked.nodes[1].via
    assert hop is not None and hop.linked_from == str(a.id)
    assert "zebra finch" in linked.text
