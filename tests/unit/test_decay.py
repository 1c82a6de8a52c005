import math

from hypothesis import given
from hypothesis import strategies as st

from engram.domain import decay


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
