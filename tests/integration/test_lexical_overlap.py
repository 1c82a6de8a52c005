"""`lexical_alongside` (ADR 0017): the full-text statements run on a worker, in the caller's read
transaction, while the caller does other work; on both backends."""

from __future__ import annotations

import threading

import pytest

from engram.services.bootstrap import Engram
from tests.integration.test_reading_fast_paths import QUERIES, populate


def test_it_ranks_as_lexical_does_and_runs_the_callers_work_on_the_caller(engram: Engram) -> None:
    being_id, _ = populate(engram, "Aria", 300, seed=3)
    search = engram.views.search
    caller = threading.get_ident()
    ran_on: list[int] = []

    def alongside() -> str:
        ran_on.append(threading.get_ident())
        return "vectors"

    for text in QUERIES:
        names = search.actor_terms(being_id, text)
        want = search.lexical(being_id, text, 20, actors=names)
        with search.read.snapshot("memory"):
            got = search.lexical_alongside(alongside, being_id, text, 20, actors=names)
        assert got == (want, "vectors")
        assert want, text
    assert ran_on == [caller] * len(QUERIES)
    assert engram.views.overlap.overlapped == len(QUERIES)


def test_the_worker_reads_in_the_callers_snapshot(engram: Engram) -> None:
    being_id, _ = populate(engram, "Aria", 50, seed=4)
    search = engram.views.search
    added: list[str] = []
    with search.read.snapshot("memory"):
        before = search.lexical(being_id, "chess", 100)
        # Written and projected (on another thread: this one's connection is in the snapshot) after
        # the snapshot began: invisible to its reads, the worker's too.
        writer = threading.Thread(target=lambda: added.extend(_chess_nodes(engram, being_id, 5)))
        writer.start()
        writer.join(timeout=60)
        assert len(added) == 5
        hits, _ = search.lexical_alongside(lambda: None, being_id, "chess", 100)
        assert hits == before
    after = search.lexical(being_id, "chess", 100)
    assert set(added) <= {i for i, _ in after}


def _chess_nodes(engram: Engram, being_id: object, count: int) -> list[str]:
    from uuid import UUID, uuid4

    from engram.domain.being import Being
    from engram.domain.cluster import Cluster
    from engram.domain.node import MemoryNode
    from engram.domain.scene import SceneInput

    assert isinstance(being_id, UUID)
    being = engram.store.get(Being, being_id)
    root = engram.store.get(Cluster, next(iter(being.root_ids.values())))
    nodes = [
        MemoryNode.create(
            uuid4(),
            SceneInput.model_validate(
                {"scene": {"action": f"chess again {i}", "actors": ["me"], "when": ["2026-03-01"]}}
            ),
            root,
            0,
            engram.clock.now(),
        )
        for i in range(count)
    ]
    engram.store.save(*nodes)
    engram.views.ensure()
    return [str(n.id) for n in nodes]


def test_no_read_may_use_the_lent_connection(engram: Engram) -> None:
    being_id, _ = populate(engram, "Aria", 50, seed=6)
    search = engram.views.search
    read = search.read

    def reads_the_views() -> object:
        return read.nodes(being_id, limit=1)

    with pytest.raises(RuntimeError, match="connection is the worker's"):
        search.lexical_alongside(reads_the_views, being_id, "chess garden", 10)
    # The connection came back: reads work again.
    assert read.nodes(being_id, limit=1)
    assert search.lexical(being_id, "chess", 5)
