"""A reader that picked the old generation just before a rebuild's switch still gets its answer.

Blue-green means the old generation keeps serving until the switch; these tests pin down the moment
right after it: the old generation must not be dropped under a read that already chose it.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.projections.vector_index import ScoredPoint
from engram.projections.vectors import nodes_alias
from engram.services.bootstrap import Engram

DIM = 8
SCENE = validate_scene_object({"action": "fed the cat", "actors": ["me"], "when": ["2026-05-01"]})


def _populate(e: Engram, count: int = 30) -> tuple[UUID, list[UUID]]:
    registered = e.beings.register("Aria")
    root = e.store.get(Cluster, UUID(registered.roots["Business"]))
    rng = random.Random(1)
    nodes = []
    for _ in range(count):
        node = MemoryNode.create(e.ids.new_id(), SCENE, root, 0, e.clock.now())
        node.embed(Embedding.from_floats("m", [rng.uniform(-1, 1) for _ in range(DIM)]), e.clock.now())
        nodes.append(node)
    e.store.save(*nodes)
    e.views.ensure()
    return UUID(registered.being_id), [n.id for n in nodes]


def test_sql_read_begun_before_the_switch_finds_its_tables(engram: Engram) -> None:
    _, node_ids = _populate(engram)
    views = engram.views
    db, projection = views.dbs["memory"], views.projections["memory"]
    switched = threading.Event()
    result: list[Any] = []

    def rebuild() -> None:
        try:
            result.append(views.rebuild("memory", progress=lambda *_: switched.set()))
        except BaseException as exc:
            result.append(exc)

    with db.read() as conn:
        tables = engine.read_tables(conn, db, projection)  # this read chose generation 1
        assert tables["nodes"].endswith("_g1")
        thread = threading.Thread(target=rebuild)
        thread.start()
        assert switched.wait(30), "the rebuild reports its end after switching"
        time.sleep(0.3)  # time enough to drop generation 1, if nothing waited for this read
        rows = conn.query(f"SELECT id FROM {tables['nodes']}")
    thread.join(timeout=30)
    assert sorted(r["id"] for r in rows) == sorted(str(n) for n in node_ids)
    assert result == [2]
    status = engine.status(db, projection)
    assert (status.generation, status.building) == (2, {})
    with db.read() as conn:
        assert engine.read_tables(conn, db, projection)["nodes"].endswith("_g2")


def test_vector_search_that_resolved_the_old_collection_still_answers(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    being_id, node_ids = _populate(engram)
    views = engram.views
    index = views.vector_index
    search = index.search
    resolved, go = threading.Event(), threading.Event()

    def resolve_then_wait(
        collection: str, being: UUID, vector: Any, limit: int, **kw: Any
    ) -> list[ScoredPoint]:
        """The search resolves the alias, then (slowly) queries what it resolved."""
        target = index.resolve_alias(collection) or collection
        resolved.set()
        go.wait(30)
        return search(target, being, vector, limit, **kw)

    monkeypatch.setattr(index, "search", resolve_then_wait)
    probe = np.ones(DIM, dtype=np.float32)
    answers: list[Any] = []

    def reader() -> None:
        try:
            answers.append(views.vectors.similar_nodes(being_id, "m", probe, 100))
        except BaseException as exc:
            answers.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    assert resolved.wait(30)

    def switched(*_: Any) -> None:
        # The switch is done: the search queries the collection it resolved before it, a moment later.
        threading.Timer(0.2, go.set).start()

    views.rebuild("vectors", progress=switched)
    thread.join(timeout=30)
    assert len(answers) == 1 and not isinstance(answers[0], BaseException), answers
    assert {i for i, _ in answers[0]} == set(node_ids)
    monkeypatch.undo()
    assert index.resolve_alias(nodes_alias("m")).endswith("__g2")
    assert views.vectors.similar_nodes(being_id, "m", probe, 100) == answers[0]
