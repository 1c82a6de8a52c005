"""The decay policy (spec 000, ❷ ❸ ❺) as pure functions.

A node's session count is *derived*: the being's patrol cycle minus the cycle
of the node's last activation. One patrol cycle is therefore one event on the
Being, never one event per node. Because the decay curve is monotonic, the
cycle at which a node crosses the dying threshold has a closed form; read
models index it so that patrol finds the dying (and the revivable) in
O(transitions) instead of scanning every node.
"""

from __future__ import annotations

import math

DECAY_SESSIONS = 30.0
"""The e-folding constant of the spec: eff_imp = importance × exp(−sessions / 30)."""

DYING_THRESHOLD = 0.05
"""At or below this effective importance a node is dying (spec ❸); above it a dead node revives (❺)."""

DEFAULT_IMPORTANCE = 0.5


def clamp_importance(value: float | None) -> float:
    """The spec's `clamp(0, 1, importance ?? 0.5)`."""
    if value is None or math.isnan(value):
        return DEFAULT_IMPORTANCE
    return min(1.0, max(0.0, value))


def session_count(being_cycle: int, last_activation_cycle: int) -> int:
    return max(0, being_cycle - last_activation_cycle)


def effective_importance(importance: float, sessions: int) -> float:
    return importance * math.exp(-sessions / DECAY_SESSIONS)


def is_at_or_below_threshold(importance: float, sessions: int) -> bool:
    return effective_importance(importance, sessions) <= DYING_THRESHOLD


def revives(importance: float) -> bool:
    """Spec ❺ for a dead node that a read reached since it died: its effective importance is above 0.05.

    The spec's ❷ counts patrols for *active* nodes only, so a dead node's session count stands
    still, and a read sets it to 0: at ❺ the count of a dead node that was read is 0, however many
    patrols ran since the read. The derived count (being cycle − last activation) would also count
    the patrols the node spent dead, and keep dead the nodes with importance in (0.05, ≈0.0517]
    that the spec revives (ADR 0002).
    """
    return not is_at_or_below_threshold(importance, 0)


def sessions_until_dying(importance: float) -> int:
    """The smallest session count n with importance × exp(−n/30) ≤ 0.05.

    The closed form is ceil(30 · ln(importance / 0.05)); the candidate is then
    checked against the very predicate patrol uses, so that floating-point
    rounding can never make the index and the rule disagree.
    """
    if is_at_or_below_threshold(importance, 0):
        return 0
    n = max(0, math.ceil(DECAY_SESSIONS * math.log(importance / DYING_THRESHOLD)))
    while n > 0 and is_at_or_below_threshold(importance, n - 1):
        n -= 1
    while not is_at_or_below_threshold(importance, n):
        n += 1
    return n


def dying_cycle(importance: float, last_activation_cycle: int) -> int:
    """The first being cycle at which the node's effective importance is ≤ 0.05."""
    return last_activation_cycle + sessions_until_dying(importance)
