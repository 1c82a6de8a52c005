"""Decay over many patrol cycles, checked against the spec's formula (❷ ❸ ❺), on both backends.

A node's session count is 1 after the patrol that created it (the spec's ❷ increments fresh nodes
too), so a node of importance 0.5 that is never read is flagged dying at its 70th patrol: the first n
with 0.5 × exp(−n/30) ≤ 0.05. The expected cycles below come from that formula, evaluated here, not
from `domain.decay`.
"""

from __future__ import annotations

import math
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import Mapper, StoredEvent

from engram.domain.being import Being
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from tests.patrol_support import ScriptedLLM, history_types, note_scenes, scene

CYCLES = 150


def first_dying_patrol(importance: float) -> int:
    """The n-th patrol of a node's life (its creating patrol is the 1st) at which it is flagged dying."""
    n = 0
    while importance * math.exp(-n / 30) > 0.05:
        n += 1
    return n


def _nodes_by_action(engram: Any, being_id: UUID) -> dict[str, str]:
    engram.views.ensure()
    return {n["action"]: n["id"] for n in engram.views.read.nodes(being_id)}


def _reactivate(engram: Any, being_id: UUID, node_id: str, source: ReactivationSource) -> int:
    being = engram.store.get(Being, being_id)
    node = engram.store.get(MemoryNode, UUID(node_id), being_id=being_id)
    increment = node.reactivate(source, being.cycle, engram.clock.now())
    engram.store.save(node)
    return increment


def test_formula_gives_the_70th_patrol_for_the_default_importance() -> None:
    assert first_dying_patrol(0.5) == 70
    assert 0.5 * math.exp(-69 / 30) > 0.05 >= 0.5 * math.exp(-70 / 30)


@pytest.mark.slow
def test_decay_over_150_cycles_follows_the_formula(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    plain, pinned, recalled, heavy, late, saved = (
        "Walked the dog along the river",
        "Painted a watercolor of tulips",
        "Fixed the leaking bathroom faucet",
        "Read a novel about whales",
        "Swam twelve laps at the pool",
        "Called grandmother on her birthday",
    )
    note_scenes(
        engram,
        "Aria",
        [
            scene(plain, "2021-01-03"),  # importance absent: 0.5
            scene(pinned, "2022-02-14", importance=0.5),
            scene(recalled, "2023-03-25", importance=0.5),
            scene(heavy, "2024-04-06", importance=0.9),
            scene(saved, "2020-06-28", importance=0.5),
        ],
    )
    created_in = {plain: 1, pinned: 1, recalled: 1, heavy: 1, saved: 1, late: 31}
    importance = {plain: 0.5, pinned: 0.5, recalled: 0.5, heavy: 0.9, late: 0.5, saved: 0.5}
    recall_after, rescue_after = 40, 75  # the recalled node is read after patrol 40, `saved` after 75
    # The cycle at which each node must be flagged (None: never), from the formula alone.
    expected = {
        plain: first_dying_patrol(0.5),  # 70
        heavy: first_dying_patrol(0.9),  # 87
        late: 31 - 1 + first_dying_patrol(0.5),  # its 70th patrol: 100
        recalled: recall_after + first_dying_patrol(0.5),  # 110
        pinned: None,
    }
    assert expected[plain] == 70 and expected[late] == 100 and expected[recalled] == 110
    ids: dict[str, str] = {}
    flagged_at: dict[str, int] = {}
    for cycle in range(1, CYCLES + 1):
        if cycle == created_in[late]:
            note_scenes(engram, "Aria", [scene(late, "2025-05-17")])
        report = engram.patrol("Aria")
        assert report.cycle == cycle and not report.resumed
        if cycle in (1, created_in[late]):
            ids.update(_nodes_by_action(engram, being_id))
        if cycle == 1:
            engram.nodes.pin("Aria", UUID(ids[pinned]))
        being = engram.store.get(Being, being_id)
        assert being.cycle == cycle
        for action, node_id in ids.items():
            node = engram.store.get(MemoryNode, UUID(node_id))
            if node.status == NodeStatus.DYING and action not in flagged_at:
                flagged_at[action] = cycle
            if action in (plain, late, heavy, pinned):  # never read: the count runs from creation
                assert node.session_count(cycle) == cycle - created_in[action] + 1
            if action == plain and cycle == 69:
                assert node.status == NodeStatus.ACTIVE, "0.5 × exp(−69/30) > 0.05: not dying yet"
                assert node.effective_importance(cycle) > 0.05
        if cycle == recall_after:
            assert _reactivate(engram, being_id, ids[recalled], ReactivationSource.RECALL) == 1
        if cycle == rescue_after:
            # A dying node that is read is active again at once, and its clock restarts.
            assert engram.store.get(MemoryNode, UUID(ids[saved])).status == NodeStatus.DYING
            _reactivate(engram, being_id, ids[saved], ReactivationSource.RECALL)
            assert engram.store.get(MemoryNode, UUID(ids[saved])).status == NodeStatus.ACTIVE
            flagged_at.pop(saved)

    expected[saved] = rescue_after + first_dying_patrol(0.5)  # 145
    assert {a: flagged_at.get(a) for a in expected} == expected
    for action in (plain, heavy, late, recalled):
        flags = [
            e for e in engram.audit.history("node", ids[action]) if e["type"] == "MemoryNode.FlaggedDying"
        ]
        assert [f["payload"]["cycle"] for f in flags] == [expected[action]], action
    saved_flags = [
        e["payload"]["cycle"]
        for e in engram.audit.history("node", ids[saved])
        if e["type"] == "MemoryNode.FlaggedDying"
    ]
    assert saved_flags == [70, 145]
    assert "MemoryNode.FlaggedDying" not in history_types(engram, "node", ids[pinned])
    assert engram.store.get(MemoryNode, UUID(ids[pinned])).status == NodeStatus.ACTIVE
    # The read model agrees with the aggregates.
    engram.views.ensure()
    rows = {n["id"]: n for n in engram.views.read.nodes(being_id)}
    for action, node_id in ids.items():
        assert rows[node_id]["status"] == engram.store.get(MemoryNode, UUID(node_id)).status, action
        assert rows[node_id]["importance"] == importance[action]


def _make_dead_the_dying() -> ScriptedLLM:
    def consolidate(call: Any) -> dict[str, Any]:
        return {"merges": [], "make_dead": [m.id for m in call.memories if m.dying]}

    return ScriptedLLM({"consolidate_cluster": consolidate})


def test_a_dead_node_read_by_recall_memory_revives_in_the_next_patrol(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    # importance 0.06: the first n with 0.06 × exp(−n/30) ≤ 0.05 is 6.
    assert first_dying_patrol(0.06) == 6
    note_scenes(
        engram,
        "Aria",
        [
            scene("Walked the dog along the river", "2021-01-03", importance=0.06),
            scene("Painted a watercolor of tulips", "2022-02-14", importance=0.06),
        ],
    )
    llm = _make_dead_the_dying()
    for _ in range(5):
        engram.patrol("Aria", llm=llm)
    ids = _nodes_by_action(engram, being_id)
    read_one, left_alone = ids["Walked the dog along the river"], ids["Painted a watercolor of tulips"]
    assert {engram.store.get(MemoryNode, UUID(i)).status for i in ids.values()} == {NodeStatus.ACTIVE}
    engram.patrol("Aria", llm=llm)  # cycle 6: ❸ flags both, ❹ lets both go
    for node_id in (read_one, left_alone):
        node = engram.store.get(MemoryNode, UUID(node_id))
        assert node.status == NodeStatus.DEAD
        assert history_types(engram, "node", node_id)[-2:] == [
            "MemoryNode.FlaggedDying",
            "MemoryNode.MadeDead",
        ]

    assert _reactivate(engram, being_id, read_one, ReactivationSource.RECALL_MEMORY) == 2
    node = engram.store.get(MemoryNode, UUID(read_one))
    assert (node.status, node.reactivation_count, node.read_since_death) == (NodeStatus.DEAD, 2, True)

    report = engram.patrol("Aria", llm=llm)  # cycle 7: ❺ revives the node that was read
    assert report.cycle == 7
    revive = next(s for s in report.steps if s["step"] == "revive")
    assert revive["counts"] == {"revived": 1}
    node = engram.store.get(MemoryNode, UUID(read_one))
    assert node.status == NodeStatus.ACTIVE and node.reactivation_count == 2
    assert [
        e["payload"]["cycle"]
        for e in engram.audit.history("node", read_one)
        if e["type"] == "MemoryNode.Revived"
    ] == [7]
    assert engram.store.get(MemoryNode, UUID(left_alone)).status == NodeStatus.DEAD
    engram.views.ensure()
    assert engram.views.read.node(being_id, UUID(read_one))["status"] == "active"

    # Its session count is 0 at its revival (cycle 7), as in the spec, whose ❷ skips dead nodes
    # (ADR 0002): dying again 6 patrols later, at cycle 13.
    for _ in range(5):
        engram.patrol("Aria", llm=llm)
    assert engram.store.get(MemoryNode, UUID(read_one)).status == NodeStatus.ACTIVE  # cycle 12
    engram.patrol("Aria", llm=llm)
    assert engram.store.get(MemoryNode, UUID(read_one)).status == NodeStatus.DEAD  # flagged at 13, let go
    flags = [
        e["payload"]["cycle"]
        for e in engram.audit.history("node", read_one)
        if e["type"] == "MemoryNode.FlaggedDying"
    ]
    assert flags == [6, 13]
    assert (
        engram.store.get(MemoryNode, UUID(left_alone)).status == NodeStatus.DEAD
    )  # never read: never revived


def test_a_dead_node_just_above_the_threshold_revives_as_in_the_spec(engram) -> None:
    """Importance 0.051: dead after its first patrol (0.051 × e^(−1/30) ≈ 0.0493). Read, the spec's
    count is 0 and stays 0 while the node is dead, so ❺ revives it (0.051 > 0.05); the count since the
    read would be 1 at the next patrol and keep it dead (ADR 0002)."""
    being_id = UUID(engram.beings.register("Aria").being_id)
    assert first_dying_patrol(0.051) == 1 and 0.051 * math.exp(-1 / 30) <= 0.05 < 0.051
    note_scenes(engram, "Aria", [scene("Walked the dog along the river", "2021-01-03", importance=0.051)])
    llm = _make_dead_the_dying()
    engram.patrol("Aria", llm=llm)  # cycle 1: created, flagged dying, let go
    [node_id] = _nodes_by_action(engram, being_id).values()
    assert engram.store.get(MemoryNode, UUID(node_id)).status == NodeStatus.DEAD

    engram.patrol("Aria", llm=llm)  # cycle 2: dead and unread, it stays dead
    assert engram.store.get(MemoryNode, UUID(node_id)).status == NodeStatus.DEAD
    _reactivate(engram, being_id, node_id, ReactivationSource.SEARCH_MEMORY)
    engram.views.ensure()
    assert [r["id"] for r in engram.views.read.revivable(being_id)] == [node_id]

    report = engram.patrol("Aria", llm=llm)  # cycle 3: ❺ revives it; its count restarts at 0
    assert next(s for s in report.steps if s["step"] == "revive")["counts"] == {"revived": 1}
    node = engram.store.get(MemoryNode, UUID(node_id))
    assert (node.status, node.session_count(3), node.dying_cycle) == (NodeStatus.ACTIVE, 0, 4)
    engram.views.ensure()
    row = engram.views.read.node(being_id, UUID(node_id))
    assert (row["status"], row["last_activated_cycle"], row["dying_cycle"]) == ("active", 3, 4)

    engram.patrol("Aria", llm=llm)  # cycle 4: count 1, 0.0493 ≤ 0.05: dying and let go again
    assert engram.store.get(MemoryNode, UUID(node_id)).status == NodeStatus.DEAD


def test_a_revival_recorded_before_the_clock_restarted_replays_as_recorded(engram) -> None:
    """`Revived` version 1 (before ADR 0002 was corrected) left the count running from the read. A v1
    record, written as v1 code wrote it, is upcast with `restarts_clock = false`: the aggregate and the
    memory view replay it as it was recorded, and the decisions recorded after it stay explainable."""
    being_id = UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", [scene("Walked the dog along the river", "2021-01-03", importance=0.06)])
    llm = _make_dead_the_dying()
    for _ in range(6):
        engram.patrol("Aria", llm=llm)  # dead at cycle 6
    [node_id] = _nodes_by_action(engram, being_id).values()
    _reactivate(engram, being_id, node_id, ReactivationSource.RECALL)  # read at cycle 6
    node = engram.store.get(MemoryNode, UUID(node_id))
    node.revive(7, engram.clock.now())
    [revived] = node.collect_events()

    # The event in clear, as a log written before encryption holds it (ADR 0074).
    mapper = Mapper(transcoder=engram.store.app.mapper.transcoder)
    stored = mapper.to_stored_event(revived)
    state = mapper.transcoder.decode(stored.state)
    assert (state.pop("class_version"), state.pop("restarts_clock")) == (2, True)
    v1 = StoredEvent(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=stored.topic,
        state=mapper.transcoder.encode(state),
    )
    assert b"restarts_clock" not in v1.state and b"class_version" not in v1.state
    engram.store.app.recorder.insert_events([v1])

    node = engram.store.get(MemoryNode, UUID(node_id))
    assert (node.status, node.last_activated_cycle, node.session_count(7), node.dying_cycle) == (
        NodeStatus.ACTIVE,
        6,
        1,
        12,
    )
    engram.views.ensure()
    row = engram.views.read.node(being_id, UUID(node_id))
    assert (row["status"], row["last_activated_cycle"], row["dying_cycle"]) == ("active", 6, 12)
