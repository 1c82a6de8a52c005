"""Merging a being's full-text index into one b-tree (ADR 0020).

- a merge keeps every lexical answer and score, works in steps, and finds nothing left to do after;
- `FullTextMaintenance` merges an index once it grew enough, not again until it grows again, and
  again after a rebuild's new generation; the worker does it in a thread of its own;
- PostgreSQL's GIN index needs none of it: nothing is ever due there.
"""

from __future__ import annotations

import random
import threading
from typing import Any
from uuid import UUID

import pytest

from engram.adapters.fulltext import fts5_merge
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.services.bootstrap import Engram, bootstrap
from engram.services.fulltext_maintenance import FullTextMaintenance
from engram.services.worker import Worker
from tests.support import SeededIds, SteppingClock

VERBS = ["walked", "cooked", "argued", "laughed", "painted", "sailed", "read", "sang"]
PEOPLE = ["Mina", "Jonas", "Ilse", "Tomas", "Ruth"]
PLACES = ["river", "kitchen", "harbour", "library", "garden", "market"]
QUERIES = ["walked by the river", "Mina painted", "harbour", "sang in the garden with Ruth", "market"]


@pytest.fixture
def engram(sqlite_engram: Engram) -> Engram:
    return sqlite_engram


def root_cluster(e: Engram, name: str = "Aria") -> Cluster:
    registered = e.beings.register(name)
    return e.store.get(Cluster, UUID(registered.roots["Business"]))


def add_nodes(e: Engram, cluster: Cluster, count: int, rng: random.Random, per_batch: int = 5) -> None:
    """`count` nodes, caught up `per_batch` at a time: each catch-up writes a b-tree of its own."""
    for start in range(0, count, per_batch):
        nodes = []
        for _ in range(min(per_batch, count - start)):
            action = f"{rng.choice(VERBS)} with {rng.choice(PEOPLE)} by the {rng.choice(PLACES)}"
            scene = validate_scene_object(
                {"action": action, "actors": [rng.choice(PEOPLE)], "when": ["2026-04-01"]}
            )
            # Ids from `rng`: with random ids, FTS5's segments came out different from run to run,
            # and about one run in six left a being a single b-tree (a merge with nothing to do).
            node_id = UUID(int=rng.getrandbits(128), version=4)
            nodes.append(MemoryNode.create(node_id, scene, cluster, 0, e.clock.now()))
        e.store.save(*nodes)
        e.views.ensure(names=["memory"])


def answers(e: Engram, being_id: UUID) -> list[list[tuple[str, float]]]:
    return [e.views.search.lexical(being_id, q, 50) for q in QUERIES]


def merge(e: Engram, being_id: UUID) -> int:
    return fts5_merge.merge(e.views.dbs["memory"], e.views.projections["memory"], str(being_id))


def test_a_merge_keeps_every_answer_and_leaves_nothing_to_merge(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = root_cluster(engram)
    add_nodes(engram, cluster, 5, random.Random(1))
    [index] = fts5_merge.being_indexes(engram.views.dbs["memory"], engram.views.projections["memory"])
    table = index.table
    with engram.views.dbs["memory"].write() as conn:  # pages of 64 bytes: a small index, many pages
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('pgsz', 64)")
    add_nodes(engram, cluster, 115, random.Random(11))
    before = answers(engram, cluster.being_id)
    assert all(before)
    monkeypatch.setattr(fts5_merge, "MERGE_PAGES", 1)  # a page per step
    db, projection = engram.views.dbs["memory"], engram.views.projections["memory"]
    # A merge asked to stop (the worker stopping) stops between steps; the next one goes on.
    answers_to_stopping = iter([False, False, True])
    stopped = fts5_merge.merge(
        db, projection, str(cluster.being_id), stopping=lambda: next(answers_to_stopping)
    )
    assert stopped == 2 and answers(engram, cluster.being_id) == before
    steps = merge(engram, cluster.being_id)
    assert steps > 1
    assert answers(engram, cluster.being_id) == before  # same rows, same bm25 to the last bit
    assert merge(engram, cluster.being_id) == 0  # one b-tree: a new merge finds nothing to do
    add_nodes(engram, cluster, 10, random.Random(2))
    assert merge(engram, cluster.being_id) >= 1  # new b-trees beside the merged one


def test_a_merge_touches_only_its_being(engram: Engram) -> None:
    aria, bo = root_cluster(engram, "Aria"), root_cluster(engram, "Bo")
    add_nodes(engram, aria, 30, random.Random(3))
    add_nodes(engram, bo, 30, random.Random(4))
    tables = {
        i.being_id: i.table
        for i in fts5_merge.being_indexes(engram.views.dbs["memory"], engram.views.projections["memory"])
    }

    def blocks(being: Cluster) -> list[dict[str, Any]]:
        with engram.views.dbs["memory"].read() as conn:
            return conn.query(f"SELECT id, block FROM {tables[str(being.being_id)]}_data ORDER BY id")

    bo_before, aria_before = blocks(bo), blocks(aria)
    assert merge(engram, aria.being_id) >= 1
    assert blocks(aria) != aria_before
    assert blocks(bo) == bo_before


def test_maintenance_merges_after_growth_and_not_again_until_more(engram: Engram) -> None:
    rng = random.Random(5)
    cluster = root_cluster(engram)
    maintenance = FullTextMaintenance(engram.views, min_new_rows=30)
    add_nodes(engram, cluster, 29, rng)
    assert maintenance.due() == [] and maintenance.run() == []
    add_nodes(engram, cluster, 1, rng)
    [due] = maintenance.due()
    assert due.being_id == str(cluster.being_id) and due.rows == 30
    [report] = maintenance.run()
    assert report["being_id"] == str(cluster.being_id) and report["rows"] == 30 and report["steps"] >= 1
    assert maintenance.due() == []
    add_nodes(engram, cluster, 29, rng)
    assert maintenance.due() == []
    add_nodes(engram, cluster, 1, rng)
    assert [i.rows for i in maintenance.due()] == [60]
    assert [r["rows"] for r in maintenance.run(force=True)] == [60]
    # A rebuild fills a new generation's index: due again, though no row was added.
    engram.views.rebuild_all(["memory"])
    assert [i.rows for i in maintenance.due()] == [60]


def test_the_worker_merges_in_its_maintenance_thread_and_reads_never_do(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = root_cluster(engram)
    add_nodes(engram, cluster, 40, random.Random(6))
    calls: list[str] = []
    done = threading.Event()
    original = fts5_merge.merge

    def recording(*args: Any, **kwargs: Any) -> int:
        calls.append(threading.current_thread().name)
        steps = original(*args, **kwargs)
        done.set()
        return steps

    monkeypatch.setattr(fts5_merge, "merge", recording)
    engram.views.search.lexical(cluster.being_id, "river", 5)
    assert calls == []
    # As `engram worker` builds it: threshold and interval from ENGRAM_FULLTEXT_* settings.
    monkeypatch.setattr(engram.views.settings, "fulltext_merge_min_rows", 30)
    monkeypatch.setattr(engram.views.settings, "fulltext_maintenance_interval_s", 0.05)
    worker = Worker(engram.views, names=["memory"], poll_interval=0.05)
    assert worker.fulltext is not None and worker.fulltext.min_new_rows == 30
    worker.start()
    try:
        assert done.wait(60), "the worker's maintenance never merged"
    finally:
        worker.stop()
    assert calls == ["fulltext-maintenance"]


def test_nothing_is_ever_due_on_postgres(make_settings: Any, backend: str) -> None:
    e = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds())
    try:
        cluster = root_cluster(e)
        add_nodes(e, cluster, 20, random.Random(7))
        maintenance = FullTextMaintenance(e.views, min_new_rows=1)
        due = maintenance.due()
        if backend == "postgres":
            assert due == [] and maintenance.run(force=True) == []
            assert Worker(e.views, names=["memory"]).fulltext is None
        else:
            assert [i.rows for i in due] == [20]
            assert Worker(e.views, names=["memory"]).fulltext is not None
        assert all(answers(e, cluster.being_id)[:1])  # lexical search works either way
    finally:
        e.close()
