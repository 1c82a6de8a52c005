"""Retrieval metrics over ranked hits, each hit named by its source reference (a LoCoMo `dia_id`).

For one question with evidence E (turn ids) and ranked references R:
- recall@k = |E ∩ R[:k]| / |E|;
- hit@k = 1 if E ∩ R[:k] is not empty;
- session recall@k = |S(E) ∩ S(R[:k])| / |S(E)|, S = the sessions `D<n>` of the ids.
Figures of a group are means over its questions (each question weighs the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.locomo import session_of

KS = (1, 3, 5, 10)


@dataclass(frozen=True)
class QuestionScore:
    recall: dict[int, float]
    hit: dict[int, float]
    session_recall: dict[int, float]


def score(evidence: Sequence[str], refs: Sequence[str | None], ks: Iterable[int] = KS) -> QuestionScore:
    wanted = set(evidence)
    if not wanted:
        raise ValueError("a question without evidence cannot be scored")
    wanted_sessions = {s for s in (session_of(e) for e in wanted) if s is not None}
    recall: dict[int, float] = {}
    hit: dict[int, float] = {}
    sessions: dict[int, float] = {}
    for k in ks:
        top = {r for r in refs[:k] if r is not None}
        found = len(wanted & top)
        recall[k] = found / len(wanted)
        hit[k] = 1.0 if found else 0.0
        top_sessions = {s for s in (session_of(r) for r in top) if s is not None}
        sessions[k] = len(wanted_sessions & top_sessions) / len(wanted_sessions) if wanted_sessions else 0.0
    return QuestionScore(recall, hit, sessions)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarise(
    scores: Sequence[QuestionScore], latencies_ms: Sequence[float], ks: Sequence[int] = KS
) -> dict[str, Any]:
    """Means over the questions; latency p50/p95 in milliseconds."""
    n = len(scores)

    def mean(values: Iterable[float]) -> float:
        return round(sum(values) / n, 4) if n else 0.0

    return {
        "questions": n,
        "recall": {str(k): mean(s.recall[k] for s in scores) for k in ks},
        "hit": {str(k): mean(s.hit[k] for s in scores) for k in ks},
        "session_recall": {str(k): mean(s.session_recall[k] for s in scores) for k in ks},
        "latency_ms": {
            "p50": round(percentile(latencies_ms, 50), 2),
            "p95": round(percentile(latencies_ms, 95), 2),
        },
    }
