"""Entity profiles' pure rules (issue #12, ADR 0064): Dunbar states, valence, the favorability rule,
and the profile's guards against a tick recorded twice."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.entity_profile import (
    EMOTION_WEIGHT,
    FAMILIARITY,
    EntityProfile,
    ObservationCursor,
    check_attributes,
    dunbar_state,
    favorability_after,
    observation,
    profile_id_for,
    valence,
)
from engram.domain.errors import InvalidInput

AT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)
BEING = UUID("00000000-0000-0000-0000-00000000000a")
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
valences = st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), max_size=60)


@pytest.mark.parametrize(
    ("favorability", "state"),
    [
        (0.0, "stranger"),
        (0.2499, "stranger"),
        (0.25, "acquaintance"),
        (0.4999, "acquaintance"),
        (0.5, "friend"),
        (0.7499, "friend"),
        (0.75, "ally"),
        (1.0, "ally"),
    ],
)
def test_dunbar_states_at_their_thresholds(favorability: float, state: str) -> None:
    assert dunbar_state(favorability) == state


def test_valence_reads_the_words() -> None:
    assert valence("thanks, I love it") == 1.0
    assert valence("this is useless and I hate it") == -1.0
    assert valence("great but terrible") == 0.0
    assert valence("the train leaves at nine") == 0.0


def test_the_rule_in_numbers() -> None:
    assert favorability_after(0.0, [0.0]) == pytest.approx(FAMILIARITY)
    assert favorability_after(0.5, [1.0]) == pytest.approx(0.5 + FAMILIARITY + EMOTION_WEIGHT)
    assert favorability_after(0.5, [-1.0]) == pytest.approx(0.5 + FAMILIARITY - EMOTION_WEIGHT)
    assert favorability_after(0.0, [-1.0] * 10) == 0.0
    assert favorability_after(0.99, [1.0] * 3) == 1.0
    # 25 neutral messages make a stranger an acquaintance.
    assert dunbar_state(favorability_after(0.0, [0.0] * 24)) == "stranger"
    assert dunbar_state(favorability_after(0.0, [0.0] * 25)) == "acquaintance"


@given(unit, valences)
def test_favorability_stays_between_0_and_1(start: float, vs: list[float]) -> None:
    assert 0.0 <= favorability_after(start, vs) <= 1.0


@given(unit, valences, st.floats(min_value=-1.0, max_value=1.0), st.floats(min_value=-1.0, max_value=1.0))
def test_a_warmer_interaction_never_gives_less(start: float, vs: list[float], a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert favorability_after(start, [*vs, low]) <= favorability_after(start, [*vs, high])


@given(unit, unit, valences)
def test_a_higher_start_never_ends_lower(a: float, b: float, vs: list[float]) -> None:
    low, high = sorted((a, b))
    assert favorability_after(low, vs) <= favorability_after(high, vs)


@given(unit, st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=40))
def test_friendly_or_neutral_interactions_never_lower_it(start: float, vs: list[float]) -> None:
    assert favorability_after(start, vs) >= round(start, 6)


def test_attributes_are_bounded() -> None:
    assert check_attributes([(" job ", " nurse ")]) == {"job": "nurse"}
    with pytest.raises(InvalidInput) as e:
        check_attributes([("job", "x" * 301)])
    assert e.value.details["field"] == "attributes.0.value"
    with pytest.raises(InvalidInput) as e:
        check_attributes([("", "x")])
    assert e.value.details["field"] == "attributes.0.name"
    with pytest.raises(InvalidInput):
        check_attributes([(f"a{i}", "x") for i in range(25)])


def test_a_profile_records_a_batch_once_and_folds_once() -> None:
    p = EntityProfile.start(BEING, "person:mina", AT)
    assert p.id == profile_id_for(BEING, "person:mina")
    obs = [
        observation("message", "m1", "thanks!", "t", 5),
        observation("fact", "f1", "Mina is a nurse", "t", 7),
    ]
    assert p.observe(obs, [1.0], 7, AT)
    assert not p.observe(obs, [1.0], 7, AT)  # the same batch again: nothing
    assert (p.observed, p.interaction_count, p.unfolded) == (2, 1, 2)
    assert p.favorability == pytest.approx(FAMILIARITY + EMOTION_WEIGHT)
    assert p.consolidate({"job": "nurse"}, 2, "m", "v", None, AT)
    assert not p.consolidate({"job": "nurse"}, 2, "m", "v", None, AT)
    assert p.unfolded == 0 and p.attributes == {"job": "nurse"}
    with pytest.raises(InvalidInput):
        EntityProfile.start(BEING, "Mina", AT)


def test_the_cursor_only_moves_forward() -> None:
    c = ObservationCursor.start(BEING, AT)
    assert c.advance(10, 3, AT) and not c.advance(10, 3, AT) and not c.advance(4, 1, AT)
    assert c.position == 10
