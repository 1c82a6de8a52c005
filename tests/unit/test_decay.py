import math
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engram.domain import decay
from engram.domain.being import Being
from engram.domain.errors import NodeNotDecayed
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from engram.domain.scene import SceneInput, validate_scene_object

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _scene(importance: float) -> SceneInput:
    return validate_scene_object(
        {"action": "walked by the river", "actors": ["me"], "when": ["2026-10-01"], "importance": importance}
    )


def test_effective_importance_follows_the_spec_formula() -> None:
    assert decay.effective_importance(0.5, 0) == 0.5
    assert math.isclose(decay.effective_importance(0.5, 30), 0.5 / math.e)
    assert math.isclose(decay.effective_importance(0.8, 15), 0.8 * math.exp(-0.5))


def test_default_importance_dies_after_70_sessions() -> None:
    # 0.5 × exp(−69/30) ≈ 0.0501 > 0.05, 0.5 × exp(−70/30) ≈ 0.0485 ≤ 0.05
    assert decay.sessions_until_dying(0.5) == 70
    assert decay.dying_cycle(0.5, last_activation_cycle=12) == 82


def test_importance_at_or_below_threshold_is_dying_at_once() -> None:
    assert decay.sessions_until_dying(0.05) == 0
    assert decay.sessions_until_dying(0.0) == 0


def test_clamp_importance_matches_the_spec() -> None:
    assert decay.clamp_importance(None) == 0.5
    assert decay.clamp_importance(1.7) == 1.0
    assert decay.clamp_importance(-0.2) == 0.0
    assert decay.clamp_importance(float("nan")) == 0.5
    assert decay.clamp_importance(0.3) == 0.3


def test_session_count_never_negative() -> None:
    assert decay.session_count(5, 3) == 2
    assert decay.session_count(3, 5) == 0


@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), st.integers(min_value=0, max_value=10_000))
def test_closed_form_cycle_is_the_first_crossing(importance: float, last: int) -> None:
    cycle = decay.dying_cycle(importance, last)
    n = cycle - last
    assert decay.is_at_or_below_threshold(importance, n)
    if n > 0:
        assert not decay.is_at_or_below_threshold(importance, n - 1)


# -- revival against the spec's stored session count (ADR 0002) -----------------------------------

BAND = st.floats(min_value=0.05, max_value=0.05 * math.exp(1 / 30), exclude_min=True)
"""Importances the derived count once kept dead where the spec revives: (0.05, 0.05·e^(1/30) ≈ 0.0517]."""


class SpecNode:
    """The spec's node, literally: a stored `session_count` that ❷ raises for active nodes only, a read
    that sets it to 0, ❺ on every dead node. A read returns a dying node to active (ADR 0004)."""

    def __init__(self, importance: float) -> None:
        self.importance, self.session_count, self.status, self.reactivation_count = importance, 0, "active", 0

    def eff_imp(self) -> float:
        return self.importance * math.exp(-self.session_count / 30)

    def read(self, tool: str) -> None:
        dead_by_name = self.status == "dead" and tool in ("recall_memory", "search_memory")
        self.reactivation_count += 2 if dead_by_name else 1  # the table under ❺; `query` as `recall`
        self.session_count = 0
        if self.status == "dying":
            self.status = "active"

    def patrol(self, consolidates: bool) -> None:
        if self.status == "active":  # ❷
            self.session_count += 1
        if self.status == "active" and self.eff_imp() <= 0.05:  # ❸
            self.status = "dying"
        if consolidates and self.status == "dying":  # ❹ with no merge partner: make_dead
            self.status = "dead"
        if self.status == "dead" and self.eff_imp() > 0.05:  # ❺
            self.status = "active"


def _engram_patrol(node: MemoryNode, cycle: int, consolidates: bool, at: datetime) -> None:
    """What the patrol does to one node at `cycle`, candidates chosen by the read model's rules."""
    if node.status == NodeStatus.ACTIVE and node.dying_cycle <= cycle:  # ❸: `dying_candidates`
        node.flag_dying(cycle, at)
    if consolidates and node.status == NodeStatus.DYING:
        node.make_dead(cycle, "no merge partner", at)
    if node.status == NodeStatus.DEAD and node.read_since_death:
        eligible = node.dying_cycle > node.last_activated_cycle  # ❺: `revivable`
        try:
            node.revive(cycle, at)
            assert eligible, "the aggregate revived a node the read model would not list"
        except NodeNotDecayed:
            assert not eligible, "the read model lists a node the aggregate refuses to revive"


@settings(max_examples=300, deadline=None)
@example(importance=0.051, reads=[(1, ReactivationSource.RECALL_MEMORY)], tail=3, consolidates=True)
@example(importance=0.06, reads=[(6, ReactivationSource.SEARCH_MEMORY)], tail=8, consolidates=True)
@given(
    importance=st.one_of(BAND, st.floats(min_value=0.0, max_value=1.0)),
    reads=st.lists(st.tuples(st.integers(0, 90), st.sampled_from(list(ReactivationSource))), max_size=5),
    tail=st.integers(0, 90),
    consolidates=st.booleans(),
)
def test_revival_and_decay_match_the_spec_with_a_stored_count(
    importance: float, reads: list[tuple[int, ReactivationSource]], tail: int, consolidates: bool
) -> None:
    """The derived count gives the spec's status after every patrol, and the spec's session count for
    every active node, whatever the importance and the patrols between reads."""
    _, business, _ = Being.register("Aria", T0)
    node = MemoryNode.create(uuid4(), _scene(importance), business, 0, T0)
    spec, cycle = SpecNode(decay.clamp_importance(importance)), 0
    for gap, source in [*reads, (tail, None)]:
        for _ in range(gap):
            cycle += 1
            at = T0 + timedelta(minutes=cycle)
            spec.patrol(consolidates)
            _engram_patrol(node, cycle, consolidates, at)
            assert node.status == spec.status, f"cycle {cycle}"
            if spec.status == "active":
                assert node.session_count(cycle) == spec.session_count, f"cycle {cycle}"
        if source is not None:
            node.reactivate(source, cycle, T0 + timedelta(minutes=cycle, seconds=30))
            spec.read(source.value)
            assert node.status == spec.status and node.reactivation_count == spec.reactivation_count
