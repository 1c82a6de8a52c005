"""Undo in the domain (ADR 0072): a merge's compensating events restore both sides, and what is no
merge is refused."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.errors import ClusterDeleted, InvalidInput, InvalidTransition
from engram.domain.node import MemoryNode, NodeStatus
from engram.domain.note import Note
from engram.domain.scene import validate_scene_object
from engram.domain.undo import Undo, undo_id_for

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _node(cluster: Cluster, action: str, when: str, *, expires_at: datetime | None = None) -> MemoryNode:
    scene = validate_scene_object({"action": action, "actors": ["me"], "when": [when], "importance": 0.4})
    return MemoryNode.create(uuid4(), scene, cluster, 0, T0, expires_at=expires_at)


@pytest.fixture
def cluster() -> Cluster:
    being, _, private = Being.register("Aria", T0)
    sub = Cluster.create_sub(uuid4(), private, "Walks", T0)
    assert sub.being_id == being.id
    return sub


def test_undoing_a_merge_gives_back_both_sides_as_they_were(cluster: Cluster) -> None:
    survivor = _node(cluster, "walked the dog", "2026-10-01", expires_at=T0 + timedelta(days=3))
    other = _node(cluster, "walked the dog again", "2026-10-02")
    other.flag_dying(99, T0)
    before_survivor, before_other = copy.deepcopy(survivor), copy.deepcopy(other)
    survivor.absorb([other], 1, T0)
    assert (
        other.status == NodeStatus.DEAD and survivor.expires_at is None and len(survivor.scene["when"]) == 2
    )

    undo_id = undo_id_for(cluster.being_id, f"{survivor.id}@{survivor.version}")
    survivor.undo_absorption(before_survivor, [other.id], undo_id, T0)
    other.unabsorb(before_other, cluster, undo_id, T0)

    assert survivor.scene["when"] == ["2026-10-01"] and survivor.importance == 0.4
    assert survivor.expires_at == T0 + timedelta(days=3)
    assert other.status == NodeStatus.DYING and other.absorbed_into is None


def test_what_no_merge_absorbed_is_not_given_back(cluster: Cluster) -> None:
    node = _node(cluster, "walked the dog", "2026-10-01")
    with pytest.raises(InvalidTransition, match="not an absorbed node"):
        node.unabsorb(copy.deepcopy(node), cluster, uuid4(), T0)
    with pytest.raises(InvalidInput, match="survivor's own"):
        node.undo_absorption(_node(cluster, "x", "2026-10-01"), [], uuid4(), T0)


def test_a_node_does_not_come_back_into_a_deleted_cluster(cluster: Cluster) -> None:
    survivor, other = _node(cluster, "a", "2026-10-01"), _node(cluster, "b", "2026-10-02")
    before = copy.deepcopy(other)
    survivor.absorb([other], 1, T0)
    cluster.deleted = True  # as a ❼ merge of small clusters leaves it
    with pytest.raises(ClusterDeleted):
        other.unabsorb(before, cluster, uuid4(), T0)


def test_an_undo_is_recorded_with_a_reason_and_one_id_per_decision(cluster: Cluster) -> None:
    undo = Undo.record(cluster.being_id, "n@3", "consolidation", "wrong", ["n"], T0)
    assert undo.id == undo_id_for(cluster.being_id, "n@3") != undo_id_for(cluster.being_id, "n@4")
    with pytest.raises(InvalidInput, match="reason"):
        Undo.record(cluster.being_id, "n@3", "consolidation", "  ", ["n"], T0)


def test_undoing_a_supersede_makes_the_old_note_live_and_only_that_supersede(cluster: Cluster) -> None:
    old, new, other = (
        Note.take(uuid4(), cluster.being_id, "preference", t, T0) for t in ("tea", "green tea", "x")
    )
    old.supersede(new, T0)
    with pytest.raises(InvalidTransition, match="not superseded by"):
        old.undo_supersede(other, uuid4(), T0)
    old.undo_supersede(new, uuid4(), T0)
    assert old.superseded_by is None and new.supersedes == [] and old.is_active(T0)
    with pytest.raises(InvalidTransition, match="not superseded by"):
        old.undo_supersede(new, uuid4(), T0)


# -- a cluster merge or split (ADR 0078) ------------------------------------------------------------


def test_a_merged_cluster_comes_back_with_its_name_parent_and_creation_time(cluster: Cluster) -> None:
    cluster.delete("merged into somewhere", T0)
    with pytest.raises(ClusterDeleted):
        cluster.require_alive()
    undo_id = uuid4()
    cluster.undo_merge(undo_id, T0 + timedelta(hours=1))
    [*_, restored] = cluster.collect_events()
    assert isinstance(restored, Cluster.MergeUndone) and not cluster.deleted
    assert (restored.undo_id, restored.name, restored.parent_id, restored.created_at) == (
        undo_id,
        "Walks",
        cluster.parent_id,
        T0,
    )
    with pytest.raises(InvalidTransition, match="is not deleted"):
        cluster.undo_merge(undo_id, T0)


def test_a_split_off_cluster_folds_back_and_its_nodes_move_by_undo(cluster: Cluster) -> None:
    part = Cluster.split_off(uuid4(), cluster, "Evening walks", T0)
    node = _node(cluster, "walked the dog at dusk", "2026-10-03")
    node.move_to(part, T0)
    undo_id = uuid4()
    node.move_by_undo(cluster, undo_id, T0)
    [*_, moved] = node.collect_events()
    assert isinstance(moved, MemoryNode.MovedByUndo) and isinstance(moved, MemoryNode.MovedToCluster)
    assert (moved.cluster_id, moved.from_cluster_id, moved.undo_id) == (cluster.id, part.id, undo_id)
    with pytest.raises(InvalidTransition, match="already"):
        node.move_by_undo(cluster, undo_id, T0)
    part.undo_split(cluster, undo_id, T0)
    [*_, folded] = part.collect_events()
    assert isinstance(folded, Cluster.SplitUndone) and isinstance(folded, Cluster.Deleted)
    assert part.deleted and folded.into_id == cluster.id
    with pytest.raises(ClusterDeleted):
        node.move_by_undo(part, undo_id, T0)
