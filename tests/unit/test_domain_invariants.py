from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import (
    CrossBeingReference,
    DeadNodeCannotBeAbsorbed,
    EmbeddingMismatch,
    InvalidInput,
    InvalidTransition,
    NodeNotDecayed,
    PinnedNodeCannotDie,
    RootClusterImmutable,
)
from engram.domain.ids import being_id_for_name, patrol_run_id
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from engram.domain.note import Note, ParseStatus
from engram.domain.patrol_run import PatrolRun, PatrolStep
from engram.domain.scene import validate_scene_object

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def at(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def scene(action: str = "walked by the river", importance: float | None = 0.5, when: str = "2026-10-01"):
    return validate_scene_object(
        {
            "action": action,
            "actors": ["me"],
            "when": [when],
            "feeling": "calm",
            **({"importance": importance} if importance is not None else {}),
        }
    )


@pytest.fixture
def world() -> tuple[Being, Cluster, Cluster]:
    return Being.register("Aria", T0)


def node_in(cluster: Cluster, cycle: int = 0, **kw) -> MemoryNode:
    return MemoryNode.create(uuid4(), scene(**kw), cluster, cycle, at(1))


def test_registration_creates_two_self_parented_roots(world) -> None:
    being, business, private = world
    assert being.id == being_id_for_name("  Aria ")
    assert {business.name, private.name} == {"Business", "Private"}
    for root in (business, private):
        assert root.is_root and root.parent_id == root.id and root.being_id == being.id


@pytest.mark.parametrize("name", ["", "   ", "x" * 65, "bad\nname"])
def test_being_names_are_validated(name: str) -> None:
    with pytest.raises(InvalidInput):
        Being.register(name, T0)


def test_roots_are_never_deleted_renamed_or_split(world) -> None:
    _, business, _ = world
    with pytest.raises(RootClusterImmutable):
        business.delete("tidy", at(1))
    with pytest.raises(RootClusterImmutable):
        business.rename("Work", at(1))
    with pytest.raises(RootClusterImmutable):
        Cluster.split_off(uuid4(), business, "part", at(1))


def test_split_shares_the_parent_and_deleted_clusters_take_no_nodes(world) -> None:
    _, business, _ = world
    sub = Cluster.create_sub(uuid4(), business, "Launch week", at(1))
    part = Cluster.split_off(uuid4(), sub, "Launch party", at(2))
    assert part.parent_id == business.id == sub.parent_id
    node = node_in(sub)
    part.delete("merged", at(3))
    with pytest.raises(Exception, match="deleted"):
        node.move_to(part, at(4))


def test_importance_is_clamped_and_defaults_to_half(world) -> None:
    _, business, _ = world
    assert node_in(business, importance=None).importance == 0.5


def test_a_node_never_joins_a_cluster_of_another_being(world) -> None:
    _, business, _ = world
    _, other_business, _ = Being.register("Bo", T0)
    node = node_in(business)
    with pytest.raises(CrossBeingReference):
        node.move_to(other_business, at(2))


def test_pinned_nodes_are_never_flagged_dying(world) -> None:
    _, business, _ = world
    node = node_in(business)
    node.pin(at(2))
    with pytest.raises(PinnedNodeCannotDie):
        node.flag_dying(500, at(3))


def test_flag_dying_only_when_decayed(world) -> None:
    _, business, _ = world
    node = node_in(business, cycle=10)
    with pytest.raises(NodeNotDecayed):
        node.flag_dying(79, at(2))  # 69 sessions: 0.0501
    node.flag_dying(80, at(2))  # 70 sessions: 0.0485
    assert node.status == NodeStatus.DYING
    assert node.dying_cycle == 80


def test_recall_restarts_the_clock_and_returns_a_dying_node_to_active(world) -> None:
    _, business, _ = world
    node = node_in(business)
    node.flag_dying(70, at(2))
    assert node.reactivate(ReactivationSource.RECALL, 70, at(3)) == 1
    assert node.status == NodeStatus.ACTIVE
    assert node.session_count(70) == 0
    assert node.dying_cycle == 140


def test_dead_nodes_get_two_from_recall_memory_and_search(world) -> None:
    _, business, _ = world
    node = node_in(business)
    node.flag_dying(70, at(2))
    node.make_dead(70, "no partner", at(3))
    assert node.reactivate(ReactivationSource.SEARCH_MEMORY, 71, at(4)) == 2
    assert node.reactivate(ReactivationSource.RECALL, 71, at(5)) == 1
    assert node.reactivation_count == 3
    assert node.status == NodeStatus.DEAD
    node.revive(71, at(6))
    assert node.status == NodeStatus.ACTIVE


def test_revive_requires_effective_importance_above_threshold(world) -> None:
    _, business, _ = world
    node = node_in(business)
    node.flag_dying(70, at(2))
    node.make_dead(70, "no partner", at(3))
    with pytest.raises(NodeNotDecayed):  # decayed, and nothing read it since
        node.revive(75, at(4))
    with pytest.raises(InvalidTransition):
        node_in(business).revive(1, at(5))


def test_an_absorbed_node_is_not_revived_without_a_read(world) -> None:
    _, business, _ = world
    survivor, absorbed = node_in(business, action="a"), node_in(business, action="b")
    survivor.absorb([absorbed], 1, at(2))
    assert absorbed.effective_importance(1) > 0.05  # high importance, yet ❺ must not undo the merge
    with pytest.raises(NodeNotDecayed):
        absorbed.revive(1, at(3))
    absorbed.reactivate(ReactivationSource.RECALL_MEMORY, 1, at(4))
    absorbed.revive(1, at(5))
    assert absorbed.status == NodeStatus.ACTIVE and absorbed.absorbed_into is None


def test_merge_rules(world) -> None:
    _, business, _ = world
    survivor = node_in(business, action="met Mina for lunch", importance=0.98)
    other = node_in(business, action="lunch with Mina again", when="2026-10-05")
    survivor.absorb([other], 3, at(2))
    assert other.status == NodeStatus.DEAD and other.absorbed_into == survivor.id
    assert survivor.importance == 1.0  # +0.05, capped
    assert survivor.scene["when"][-1] == {"date": "2026-10-05", "action": "lunch with Mina again"}
    third = node_in(business)
    with pytest.raises(DeadNodeCannotBeAbsorbed):
        third.absorb([other], 3, at(3))
    pinned = node_in(business)
    pinned.pin(at(3))
    with pytest.raises(PinnedNodeCannotDie):
        third.absorb([pinned], 3, at(4))
    with pytest.raises(InvalidInput):
        third.absorb([third], 3, at(4))


def test_make_dead_only_for_dying_unpinned(world) -> None:
    _, business, _ = world
    node = node_in(business)
    with pytest.raises(InvalidTransition):
        node.make_dead(1, "x", at(2))


def test_vectors_of_different_models_are_never_mixed(world) -> None:
    _, business, _ = world
    node = node_in(business)
    a = Embedding.from_floats("minilm", [0.1, 0.2, 0.3])
    node.embed(a, at(2))
    with pytest.raises(EmbeddingMismatch):
        node.embed(Embedding.from_floats("openai:text-embedding-3-small", [0.1, 0.2, 0.3]), at(3))
    with pytest.raises(EmbeddingMismatch):
        a.cosine(Embedding.from_floats("minilm", [0.1, 0.2]))
    with pytest.raises(InvalidInput):
        Embedding(model="minilm", dim=4, data=b"\x00" * 12)
    assert a.cosine(a) == pytest.approx(1.0)
    assert list(a.floats()) == pytest.approx([0.1, 0.2, 0.3])


def test_scene_note_keeps_raw_text_and_failures(world) -> None:
    being, _, _ = world
    prose = "  met Mina at the café — felt good  "
    note = Note.take(uuid4(), being.id, "scene", prose, at(1))
    assert note.text == prose
    assert note.parse_status == ParseStatus.FAILED and "not JSON" in (note.parse_error or "")
    with pytest.raises(InvalidTransition):
        note.mark_processed(uuid4(), at(2))
    with pytest.raises(InvalidInput):
        Note.take(uuid4(), being.id, "diary", "x", at(1))


@pytest.mark.parametrize("kind", ["tool", "map"])
def test_tool_and_map_notes_hold_no_scene(world, kind: str) -> None:
    being, _, _ = world
    note = Note.take(uuid4(), being.id, kind, "calendar: books appointments", at(1))
    assert note.kind == kind and note.parse_status == ParseStatus.NOT_APPLICABLE
    for becomes_a_node in (note.scene_input, lambda: note.mark_processed(uuid4(), at(2))):
        with pytest.raises(InvalidTransition, match=f"a {kind} note"):
            becomes_a_node()
    with pytest.raises(InvalidInput, match="tool, map"):
        Note.take(uuid4(), being.id, "maps", "x", at(1))


def test_patrol_run_steps_and_decisions(world) -> None:
    being, _, _ = world
    run = PatrolRun.start(being.id, 1, None, at(1))
    assert run.id == patrol_run_id(being.id, 1) == patrol_run_id(UUID(str(being.id)), 1)
    assert run.next_step() is PatrolStep.NOTES_TO_NODES
    run.start_step(PatrolStep.NOTES_TO_NODES, at(2))
    run.finish_step(PatrolStep.NOTES_TO_NODES, {"nodes": 3}, 1.5, at(3))
    with pytest.raises(InvalidTransition):
        run.start_step(PatrolStep.NOTES_TO_NODES, at(4))
    with pytest.raises(InvalidTransition):
        run.finish_step(PatrolStep.FLAG_DYING, {}, 0.0, at(4))
    run.record_decision(
        PatrolStep.CONSOLIDATE,
        "consolidate_cluster",
        "c1",
        model="m",
        prompt_version="v1",
        raw_answer="{}",
        parsed_plan={},
        rejected=[],
        at=at(5),
    )
    with pytest.raises(InvalidTransition):
        run.record_decision(
            PatrolStep.CONSOLIDATE,
            "consolidate_cluster",
            "c1",
            model="m",
            prompt_version="v1",
            raw_answer="{}",
            parsed_plan={},
            rejected=[],
            at=at(6),
        )
    assert run.next_step() is PatrolStep.BIRTH_SUBCLUSTERS
    with pytest.raises(InvalidTransition):
        run.finish(at(7))
