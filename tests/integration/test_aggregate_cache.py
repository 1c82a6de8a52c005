"""The aggregate cache (ADR 0022): loads equal the library's replay, whoever else writes meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from engram.domain.scene import validate_scene_object
from engram.services.aggregate_cache import AggregateCache, fork
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.errors import NotFound, WriteRaced
from engram.services.store import _project
from tests.support import SeededIds, SteppingClock


def _scene(i: int) -> Any:
    return validate_scene_object(
        {"action": f"scene {i}", "actors": ["me"], "when": ["2026-05-02"], "importance": 0.5}
    )


def _setup(engram: Engram, nodes: int = 3) -> tuple[Being, list[MemoryNode]]:
    being, business, private = Being.register("Aria", engram.clock.now())
    made = [MemoryNode.create(uuid4(), _scene(i), business, 0, engram.clock.now()) for i in range(nodes)]
    engram.store.save(being, business, private, *made)
    return being, made


def _replayed(engram: Engram, aggregate_id: UUID) -> dict[str, Any]:
    """The aggregate as the library rebuilds it from the log, past every cache."""
    return dict(vars(engram.store.app.repository.get(aggregate_id, projector_func=_project)))


def _reactivate(engram: Engram, being: Being, node_id: UUID, times: int = 1) -> None:
    _, [node] = engram.store.get_being_and_many(MemoryNode, [node_id], being.id)
    for _ in range(times):
        node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    engram.store.save(node, durable=False)


def test_loads_equal_the_librarys_replay_cold_and_warm(engram: Engram) -> None:
    being, nodes = _setup(engram)
    # Enough events for snapshots (every 10) and events after the last one.
    _reactivate(engram, being, nodes[1].id, times=23)
    engram.store.cache.clear()
    ids = [n.id for n in nodes]

    cold = engram.store.get_many(MemoryNode, ids, being_id=being.id)
    assert len(engram.store.cache) == 3
    warm_being, warm = engram.store.get_being_and_many(MemoryNode, ids, being.id)

    for loaded in (cold, warm):
        assert [dict(vars(n)) for n in loaded] == [_replayed(engram, i) for i in ids]
    assert dict(vars(warm_being)) == _replayed(engram, being.id)
    assert warm[1].reactivation_count == 23


def test_a_save_keeps_the_cached_aggregates_at_their_new_version(engram: Engram) -> None:
    being, nodes = _setup(engram)
    _reactivate(engram, being, nodes[0].id)  # loads it (cached at version 1), then saves version 2
    [held] = engram.store.cache.get([nodes[0].id]).values()
    assert held.version == 2 and held.reactivation_count == 1
    assert engram.store.cache.get([nodes[2].id]) == {}  # saved when created, never loaded


def test_writes_of_another_process_are_read_on_top_of_the_cache(
    engram: Engram, make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    being, nodes = _setup(engram)
    node_id = nodes[0].id
    assert engram.store.get(MemoryNode, node_id, being_id=being.id).reactivation_count == 0
    with bootstrap(make_settings(), clock=clock, ids=SeededIds(7)) as other:
        _reactivate(other, being, node_id, times=2)
        other_being = other.store.get(Being, being.id)
        other_being.start_patrol_cycle(clock.now())
        other.store.save(other_being)

    loaded_being, [node] = engram.store.get_being_and_many(MemoryNode, [node_id], being.id)

    assert node.reactivation_count == 2 and dict(vars(node)) == _replayed(engram, node_id)
    assert loaded_being.cycle == 1 and dict(vars(loaded_being)) == _replayed(engram, being.id)


def test_a_save_that_lost_a_race_fails_and_the_next_load_reads_the_winner(
    engram: Engram, make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    being, nodes = _setup(engram)
    node_id = nodes[0].id
    mine = engram.store.get(MemoryNode, node_id, being_id=being.id)
    with bootstrap(make_settings(), clock=clock, ids=SeededIds(7)) as other:
        _reactivate(other, being, node_id, times=3)

    mine.reactivate(ReactivationSource.RECALL, 0, clock.now())
    with pytest.raises(WriteRaced):
        engram.store.save(mine)

    again = engram.store.get(MemoryNode, node_id, being_id=being.id)
    assert again.reactivation_count == 3 and dict(vars(again)) == _replayed(engram, node_id)


def test_changing_a_loaded_aggregate_without_saving_leaves_the_cache_alone(engram: Engram) -> None:
    being, nodes = _setup(engram)
    node = engram.store.get(MemoryNode, nodes[0].id, being_id=being.id)
    node.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    node.scene["action"] = "changed in place"
    node.scene["actors"].append("someone")
    node.themes.append("a theme")
    node.status = NodeStatus.DEAD

    again = engram.store.get(MemoryNode, nodes[0].id, being_id=being.id)

    assert again is not node
    assert dict(vars(again)) == _replayed(engram, nodes[0].id)
    assert again.scene["action"] == "scene 0" and again.reactivation_count == 0


def test_a_cached_node_still_reads_as_not_found_for_another_being(engram: Engram) -> None:
    being, nodes = _setup(engram)
    bo, *bo_roots = Being.register("Bo", engram.clock.now())
    engram.store.save(bo, *bo_roots)
    engram.store.get(MemoryNode, nodes[0].id, being_id=being.id)  # now cached
    with pytest.raises(NotFound):
        engram.store.get(MemoryNode, nodes[0].id, being_id=bo.id)
    with pytest.raises(NotFound):
        engram.store.get_being_and_many(MemoryNode, [nodes[0].id], bo.id)
    with pytest.raises(NotFound):
        engram.store.get(Cluster, nodes[0].id)  # an id of another kind


def test_a_cache_of_size_zero_keeps_nothing(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    with bootstrap(make_settings(aggregate_cache_size=0), clock=clock, ids=SeededIds()) as engram:
        being, nodes = _setup(engram)
        _reactivate(engram, being, nodes[0].id, times=2)
        node = engram.store.get(MemoryNode, nodes[0].id, being_id=being.id)
        assert len(engram.store.cache) == 0
        assert node.reactivation_count == 2 and dict(vars(node)) == _replayed(engram, nodes[0].id)


def test_the_cache_drops_the_least_recently_used_and_never_goes_back_a_version(engram: Engram) -> None:
    _, nodes = _setup(engram)
    a, b, c = (engram.store.get(MemoryNode, n.id) for n in nodes)
    cache = AggregateCache(2)
    cache.put([a, b])
    cache.get([a.id])  # a is now the most recently used
    cache.put([c])
    assert set(cache.get([a.id, b.id, c.id])) == {a.id, c.id}

    newer = fork(a)
    newer.reactivate(ReactivationSource.RECALL, 0, engram.clock.now())
    newer.collect_events()
    cache.put([newer])
    cache.put([a])  # an older state read by a slower thread
    assert cache.get([a.id])[a.id].version == newer.version
    cache.refresh([b])  # not held: stays out
    assert b.id not in cache.get([b.id])


def test_a_fork_shares_no_mutable_state(engram: Engram) -> None:
    _, nodes = _setup(engram)
    node = engram.store.get(MemoryNode, nodes[0].id)
    copy = fork(node)
    copy.scene["actors"].append("x")
    copy.themes.append("y")
    assert node.scene["actors"] == ["me"] and node.themes == []
    assert dict(vars(copy)) != dict(vars(node))
    assert copy.embedding is node.embedding  # immutable values are shared, not copied
