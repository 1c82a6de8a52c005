"""Spec ❼, small-cluster consolidation, one test per branch, on both backends.

The clusters are built from aggregates with vectors chosen by angle, so that each test sets the
similarities it needs around the embedder's cluster threshold; a patrol without an LLM then runs ❼.
"""

from __future__ import annotations

from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode, NodeStatus
from engram.services.bootstrap import Engram
from tests.patrol_support import World


def test_an_empty_small_cluster_is_deleted(engram: Engram) -> None:
    w = World(engram)
    empty = w.cluster("Nothing left", w.roots["Private"])
    keeper = w.cluster("Climbing", w.roots["Private"])
    w.nodes(keeper, 3, 0.0)

    counts = w.patrol_small_clusters()

    assert counts == {"deleted_empty": 1}
    assert w.cluster_row(empty) is None and engram.store.get(Cluster, empty.id).deleted
    assert w.cluster_row(keeper) is not None


def test_a_small_cluster_joins_its_most_similar_sibling_with_its_dead_nodes(engram: Engram) -> None:
    w = World(engram)
    private = w.roots["Private"]
    small = w.cluster("Small", private)
    near = w.cluster("Near", private)
    nearer = w.cluster("Nearer", private)
    moved = w.nodes(small, 1, 0.0, dead=1)
    w.nodes(near, 3, w.angle_for(w.threshold + 0.1))
    w.nodes(nearer, 3, -w.angle_for(w.threshold + 0.3))

    counts = w.patrol_small_clusters()

    assert counts == {"merged_into_sibling": 1, "nodes_moved": 2}
    assert [w.cluster_of(n) for n in moved] == [nearer.id, nearer.id]
    assert engram.store.get(MemoryNode, moved[1]).status == NodeStatus.DEAD
    assert w.cluster_row(small) is None
    row = w.cluster_row(nearer)
    assert row is not None and row["active_count"] == 4 and row["total_count"] == 5


def test_every_sibling_is_compared_not_only_the_nearest_clusters_of_the_being(engram: Engram) -> None:
    """Ten sub-clusters of the other root, all closer than the sibling, used to hide it from a top-10
    search of the whole being; the sibling is compared all the same."""
    w = World(engram)
    small = w.cluster("Small", w.roots["Private"])
    sibling = w.cluster("Sibling", w.roots["Private"])
    moved = w.nodes(small, 2, 0.0)
    w.nodes(sibling, 3, w.angle_for(w.threshold + 0.1))
    for i in range(10):
        crowd = w.cluster(f"Other root {i}", w.roots["Business"])
        w.nodes(crowd, 3, w.angle_for(0.95) * (1 if i % 2 else -1))

    counts = w.patrol_small_clusters()

    assert counts == {"merged_into_sibling": 1, "nodes_moved": 2}
    assert {w.cluster_of(n) for n in moved} == {sibling.id}


def test_a_small_cluster_without_a_similar_enough_sibling_goes_to_its_root(engram: Engram) -> None:
    w = World(engram)
    private = w.roots["Private"]
    small = w.cluster("Small", private)
    far = w.cluster("Far", private)
    moved = w.nodes(small, 1, 0.0, dead=1)
    w.nodes(far, 3, w.angle_for(w.threshold - 0.1))

    counts = w.patrol_small_clusters()

    assert counts == {"merged_into_root": 1, "nodes_moved": 2}
    assert [w.cluster_of(n) for n in moved] == [private.id, private.id]
    assert w.cluster_row(small) is None
    far_row = w.cluster_row(far)
    assert far_row is not None and far_row["total_count"] == 3


def test_a_small_cluster_with_only_dead_nodes_goes_to_its_root(engram: Engram) -> None:
    """No active embedded node, no centroid: nothing to compare, so the parent takes the nodes."""
    w = World(engram)
    private = w.roots["Private"]
    small = w.cluster("Small", private)
    sibling = w.cluster("Sibling", private)
    moved = w.nodes(small, 0, 0.0, dead=2)
    w.nodes(sibling, 3, 0.0)

    counts = w.patrol_small_clusters()

    assert counts == {"merged_into_root": 1, "nodes_moved": 2}
    assert {w.cluster_of(n) for n in moved} == {private.id}


def test_a_small_cluster_with_child_clusters_is_kept(engram: Engram) -> None:
    w = World(engram)
    private = w.roots["Private"]
    small = w.cluster("Small parent", private)
    child = w.cluster("Child", small)
    empty_parent = w.cluster("Empty parent", private)
    empty_child = w.cluster("Child of the empty one", empty_parent)
    sibling = w.cluster("Sibling", private)
    moved = w.nodes(small, 1, 0.0)
    w.nodes(child, 3, 0.0, plane=1)
    w.nodes(empty_child, 3, 0.0, plane=2)
    w.nodes(sibling, 3, w.angle_for(w.threshold + 0.2))

    counts = w.patrol_small_clusters()

    assert counts == {"merged_into_sibling": 1, "nodes_moved": 1}
    assert w.cluster_of(moved[0]) == sibling.id
    for kept in (small, empty_parent):
        row = w.cluster_row(kept)
        assert row is not None and row["total_count"] == 0
        assert not engram.store.get(Cluster, kept.id).deleted
    assert w.cluster_row(child) is not None and w.cluster_row(empty_child) is not None
