"""One importance scale across Engram's memories (spec 003, issue #12, ADR 0060).

Each kind keeps its own scale: a node's importance is 0–1 (it drives decay, spec 000), a fact's is
0–3 (spec 004), a message's is Generative Agents' 1–10 poignancy (spec 003). Sleep's reflection adds
importance up across kinds and its threshold (150) is on the 1–10 scale, so each kind maps onto
it here, and only here.
"""

from __future__ import annotations

POIGNANCY_MIN = 1
POIGNANCY_MAX = 10

FACT_POIGNANCY = (1, 4, 7, 10)
"""A fact's importance 0, 1, 2, 3 on the 1–10 scale: evenly spread, 3 (pinned) at the top."""


def _clamp(value: float) -> int:
    return max(POIGNANCY_MIN, min(POIGNANCY_MAX, round(value)))


def node_poignancy(importance: float) -> int:
    """A node's 0–1 importance on the 1–10 scale: 0 → 1, 0.5 → 6 (5.5 rounds to even 6), 1 → 10."""
    return _clamp(1 + 9 * max(0.0, min(1.0, importance)))


def fact_poignancy(importance: int) -> int:
    return FACT_POIGNANCY[max(0, min(3, importance))]


def poignancy_to_node_importance(poignancy: int) -> float:
    """The inverse of `node_poignancy`, for what sleep writes as a node (a reflection's insight)."""
    return round((_clamp(poignancy) - 1) / 9, 4)


def poignancy_to_fact_importance(poignancy: int) -> int:
    """The fact importance whose poignancy is nearest (ties go to the higher importance)."""
    p = _clamp(poignancy)
    return min(range(4), key=lambda i: (abs(FACT_POIGNANCY[i] - p), -i))


def message_poignancy(*, text: str, role: str, urgent: bool, priority: int | None) -> int:
    """A message's heuristic importance on the 1–10 scale, offline: what the intake records and what
    an LLM may upgrade during compacting. (The features are issue #12's compacting part's to refine.)"""
    score = 2 if role == "user" else 1
    if urgent:
        score += 3
    if priority is not None:
        score = max(score, priority)
    if len(text) > 200:
        score += 1
    return _clamp(score)
