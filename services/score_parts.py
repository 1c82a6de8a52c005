"""A `query` hit's score broken down by its parts (the memory explorer's search page, issue #14).

`ranking.rank` sums each memory's parts in one tight loop and keeps only the total (it runs on every
query, ~300 candidates). Asked to explain, `query` calls `parts` afterwards for its `k` hits only: the
same formulas (`ranking`'s module docstring), part by part, from the same channel candidates and
ranking columns, so that the parts of a hit add up to its score (`tests/unit/test_score_parts.py`
checks it for every profile). What `rank` adds after the own parts — the share a neighbour passed on
(ADR 0008) and a question's penalty — is the difference between the total and those parts; the
speaker weight (ADR 0082) is a part of its own.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Collection, Sequence

from engram.projections.ranking_cache import BeingRanking
from engram.services.query_text import node_dates, query_dates
from engram.services.ranking import Candidates, Profile, date_closeness

PARTS = (
    "semantic",
    "lexical",
    "dates",
    "importance",
    "recency",
    "channel",
    "speaker",
    "neighbours",
    "question",
)
"""Every part a score can have, in the order a page shows them; a hit lists those that are not 0."""

_NOISE = 1e-12


def parts(
    p: Profile,
    ranking: BeingRanking,
    semantic: Candidates,
    lexical: Candidates,
    hits: Sequence[tuple[str, float]],
    *,
    text: str,
    now: _dt.datetime,
    actors: Collection[str] = (),
) -> dict[str, dict[str, float]]:
    """Each hit's (id, score from `rank`) parts, by id; parts that are 0 are left out."""
    sem, lex = dict(semantic), dict(lexical)
    top_lex = max(lex.values(), default=0.0) or 1.0
    sem_hi, sem_lo = max(sem.values(), default=0.0), min(sem.values(), default=0.0)
    spread = sem_hi - sem_lo
    sem_rank = {i: r for r, (i, _) in enumerate(semantic, 1)}
    lex_rank = {i: r for r, (i, _) in enumerate(lexical, 1)}
    dates = query_dates(text) if p.dates > 0 else []
    slots = ranking.slots(i for i, _ in hits)
    named = frozenset(a.lower() for a in actors) if p.speaker > 0 else frozenset()
    out: dict[str, dict[str, float]] = {}
    for node_id, total in hits:
        slot = slots.get(node_id)
        if slot is None:
            continue
        own: dict[str, float] = {}
        if p.fusion == "scaled":
            if node_id in lex:
                own["lexical"] = p.lexical * max(0.0, lex[node_id] / top_lex) ** p.lexical_power
            if node_id in sem:
                own["semantic"] = p.semantic * (1.0 if spread <= 1e-9 else (sem[node_id] - sem_lo) / spread)
        elif p.fusion == "rrf":
            if node_id in sem_rank:
                own["semantic"] = p.semantic / (p.rrf_k + sem_rank[node_id])
            if node_id in lex_rank:
                own["lexical"] = p.lexical / (p.rrf_k + lex_rank[node_id])
        else:
            own["semantic"] = p.semantic * max(0.0, sem.get(node_id, 0.0))
            own["lexical"] = p.lexical * lex.get(node_id, 0.0) / top_lex
            own["channel"] = p.channel * 0.25
        if dates:
            own["dates"] = p.dates * date_closeness(dates, node_dates(ranking.when_of(slot)), p.date_days)
        own["importance"] = p.importance * ranking.importance[slot]
        if p.recency:
            age_days = max(0.0, (now.timestamp() - ranking.activated[slot]) / 86400)
            own["recency"] = p.recency * (1.0 / (1.0 + age_days / p.recency_days))
        if named and not named.isdisjoint(ranking.actors[slot]):  # an actor the query names (ADR 0082)
            own["speaker"] = p.speaker
        keep = 1 - p.question_penalty if p.question_penalty > 0 and ranking.asks[slot] else 1.0
        before_penalty = total / keep if keep > 0 else sum(own.values())
        own["neighbours"] = before_penalty - sum(own.values())
        own["question"] = total - before_penalty
        out[node_id] = {
            name: own[name]
            for name in PARTS
            if name in own and math.isfinite(own[name]) and abs(own[name]) > _NOISE
        }
    return out
