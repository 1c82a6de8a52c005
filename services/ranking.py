"""How `query` ranks a being's memories: every profile's weights, and the fusion (ADR 0008).

`query` brings candidates from two channels — semantic: the cosine of the query's vector and a
memory's, from the vector index; lexical: the full-text index's relevance (bm25 on SQLite,
ts_rank_cd on PostgreSQL, `projections/fulltext/`) — and each candidate's ranking columns (importance,
last activation, `when`, order of noting, whether it asks: `projections/ranking_cache.py`, ADR 0015).
`rank` scores them by a profile's fusion:

- `weighted` (profile `spec-001`): spec 001's hybrid score,

      score = 0.50·semantic + 0.28·lexical + 0.10·confidence + 0.07·recency + 0.05·channel

  semantic: the cosine; lexical: the relevance over the query's best; confidence: the memory's
  importance; recency: 1 / (1 + days since the memory was last activated / 45); channel: 0.25, spec
  001's value for a fact without a channel (memories have none).

- `scaled` (profile `default`, ADR 0008): both channels on [0, 1] within the query's own candidates,

      score = 1.0·(lexical / best lexical)² + 0.5·(cosine − lowest) / (highest − lowest)
              + 0.4·exp(−days between a date the query names and the memory's / 3)
              + 0.002·importance

  then the 20 best pass a share of their score to the memories noted up to 2 steps before and after
  them on the same day (0.3, a third of that per further step; 0.8 from a question to the memory
  after it, its answer), each memory adding the best share it is offered; a memory said by an
  actor the query names then gains 0.8 (ADR 0082); a memory that asks a question keeps 0.9 of its
  score.

- `rrf` (profile `rrf`): reciprocal rank fusion of the channels' ranks, Σ weight / (60 + rank),
  plus 0.002·importance.

`semantic` and `lexical` are one channel each. Every weight above is a `Profile` field.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from engram.domain.errors import InvalidInput
from engram.projections.ranking_cache import BeingRanking
from engram.services.query_text import DateSpan, first_date, node_dates, query_dates

Candidates = Sequence[tuple[str, float]]
"""(node id, score) of one channel, best first."""


@dataclass(frozen=True)
class Profile:
    name: str
    fusion: Literal["weighted", "rrf", "scaled"]
    semantic: float
    lexical: float
    importance: float
    recency: float
    channel: float = 0.0
    rrf_k: int = 60
    recency_days: float = 45.0
    candidates: int = 100
    """How many candidates each signal contributes before fusion."""
    lexical_power: float = 1.0
    """`scaled`: bm25 / best bm25 is raised to this power (> 1 favours the clear lexical winners)."""
    dates: float = 0.0
    """Weight of the closeness between the dates a query names and a memory's `when` (ADR 0008)."""
    date_days: float = 3.0
    """Closeness is exp(−days apart / date_days)."""
    neighbours: float = 0.0
    """Share of a memory's score passed to the memories noted just before and after it on the same day."""
    neighbour_radius: int = 2
    neighbour_decay: float = 1 / 3
    """The share shrinks by this factor per step away from the memory."""
    neighbour_seeds: int = 20
    """How many of the best memories pass a share to their neighbours."""
    answers: float = 0.0
    """Share a memory that asks a question passes to the memory noted after it (its answer)."""
    question_penalty: float = 0.0
    """A memory that asks a question keeps (1 − this) of its own score."""
    actors_apart: bool = True
    """Names of the being's actors match the actors field only, and leave the semantic query."""
    speaker: float = 0.0
    """Added to a memory whose actors include one the query names (ADR 0082)."""

    def candidates_for(self, k: int) -> int:
        """How many candidates each channel brings for a query of `k` results."""
        return max(self.candidates, k)


PROFILES: dict[str, Profile] = {
    "default": Profile(
        "default",
        "scaled",
        semantic=0.5,
        lexical=1.0,
        importance=0.002,
        recency=0.0,
        lexical_power=2.0,
        dates=0.4,
        neighbours=0.3,
        answers=0.8,
        question_penalty=0.1,
        speaker=0.8,
    ),
    "rrf": Profile("rrf", "rrf", semantic=1.0, lexical=1.0, importance=0.002, recency=0.0),
    # spec 001: 0.50·semantic + 0.28·lexical + 0.10·confidence + 0.07·recency + 0.05·channel
    "spec-001": Profile(
        "spec-001", "weighted", semantic=0.50, lexical=0.28, importance=0.10, recency=0.07, channel=0.05
    ),
    "semantic": Profile("semantic", "weighted", semantic=1.0, lexical=0.0, importance=0.0, recency=0.0),
    "lexical": Profile("lexical", "weighted", semantic=0.0, lexical=1.0, importance=0.0, recency=0.0),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidInput(f"unknown profile {name!r}; profiles are {', '.join(PROFILES)}") from None


def rank(
    p: Profile,
    ranking: BeingRanking,
    semantic: Candidates,
    lexical: Candidates,
    *,
    text: str,
    k: int,
    statuses: Collection[str],
    now: _dt.datetime,
    exclude: Collection[str] = (),
    actors: Collection[str] = (),
) -> list[tuple[str, float]]:
    """`query`'s `k` best (node id, score), best first, for the query `text`: its candidates from both
    channels and, when the profile lets neighbours share, the memories around the best of them among
    `statuses`, scored by `p` on the being's `ranking` columns as of `now`. Nodes in `exclude` (hidden:
    sensitive or expired; the callers leave them out of the channels too) may still be reached as a
    neighbour, and are then dropped: never one of the `k`. `actors`: the words of `text` that name
    one of the being's actors (the `speaker` weight favours the memories of those actors)."""
    slots = ranking.slots(i for i, _ in lexical)
    slots.update(ranking.slots(i for i, _ in semantic if i not in slots))  # each id looked up once
    dates = query_dates(text) if p.dates > 0 else []
    named = frozenset(a.lower() for a in actors) if p.speaker > 0 else frozenset()
    scores = combine(p, semantic, lexical, ranking, slots, now, dates)
    if slots and (p.neighbours > 0 or p.answers > 0):
        seeds = [i for i, _ in best_of(scores, p.neighbour_seeds)]
        extra = {
            i: s for i, s in ranking.around(seeds, p.neighbour_radius, statuses).items() if i not in slots
        }
        slots.update(extra)
        scores.update(combine(p, semantic, lexical, ranking, extra, now, dates))
        scores = spread_to_neighbours(p, scores, ranking, slots, seeds)
    if named:  # after the neighbours' shares: a reply to the named actor's memory gains nothing from it
        actors_of, bonus = ranking.actors, p.speaker
        scores = {i: s + bonus if not named.isdisjoint(actors_of[slots[i]]) else s for i, s in scores.items()}
    if p.question_penalty > 0:
        asks, keep = ranking.asks, 1 - p.question_penalty
        scores = {i: s * keep if asks[slots[i]] else s for i, s in scores.items()}
    if exclude:
        scores = {i: s for i, s in scores.items() if i not in exclude}
    return best_of(scores, k)


def best_of(scores: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    """The `k` best (id, score), best first, ties by id: `sorted` by (−score, id), cut to `k`.

    Only the items that can make the cut are sorted: those scoring at least the k-th best score
    (found without a key function), so a query sorts ~k items instead of its ~300 candidates."""
    if k <= 0 or not scores:
        return []
    floor = heapq.nlargest(k, scores.values())[-1]
    top = [(i, s) for i, s in scores.items() if s >= floor]
    top.sort(key=lambda kv: (-kv[1], kv[0]))
    return top[:k]


def date_closeness(spans: Iterable[DateSpan], dates: Iterable[_dt.date], days: float) -> float:
    """exp(−distance in days / `days`) between the nearest query span and node date; 0 without either."""
    best = 0.0
    spans = list(spans)
    for d in dates:
        for start, end in spans:
            distance = 0 if start <= d <= end else min(abs((d - start).days), abs((d - end).days))
            best = max(best, math.exp(-distance / days))
    return best


def combine(
    p: Profile,
    semantic: Candidates,
    lexical: Candidates,
    ranking: BeingRanking,
    slots: Mapping[str, int],
    now: _dt.datetime,
    dates: Sequence[DateSpan] = (),
) -> dict[str, float]:
    """The score of each node of `slots` (its slot in `ranking`) from its channel scores or ranks, by
    the profile's fusion (the module's formulas)."""
    sem = dict(semantic)
    lex = dict(lexical)
    top_lex = max(lex.values(), default=0.0) or 1.0
    sem_hi = max(sem.values(), default=0.0)
    sem_lo = min(sem.values(), default=0.0)
    importance, activated = ranking.importance, ranking.activated
    now_s = now.timestamp()
    out: dict[str, float] = {}
    spread = sem_hi - sem_lo
    flat = spread <= 1e-9
    fusion, w_lex, power, w_sem, w_imp = p.fusion, p.lexical, p.lexical_power, p.semantic, p.importance
    with_dates = bool(dates) and p.dates > 0
    if fusion == "rrf":
        sem_rank = {i: r for r, (i, _) in enumerate(semantic, 1)}
        lex_rank = {i: r for r, (i, _) in enumerate(lexical, 1)}
    for node_id, slot in slots.items():
        if fusion == "scaled":
            score = 0.0
            x = lex.get(node_id)
            if x is not None:
                score += w_lex * max(0.0, x / top_lex) ** power
            y = sem.get(node_id)
            if y is not None:
                score += w_sem * (1.0 if flat else (y - sem_lo) / spread)
        elif fusion == "rrf":
            score = sum(
                w / (p.rrf_k + ranks[node_id])
                for w, ranks in ((w_sem, sem_rank), (w_lex, lex_rank))
                if node_id in ranks
            )
        else:
            score = w_sem * max(0.0, sem.get(node_id, 0.0)) + w_lex * lex.get(node_id, 0.0) / top_lex
            score += p.channel * 0.25  # spec 001: 0.25 for a fact with no channel
        if with_dates:
            score += p.dates * date_closeness(dates, node_dates(ranking.when_of(slot)), p.date_days)
        if p.recency:
            age_days = max(0.0, (now_s - activated[slot]) / 86400)
            score += w_imp * importance[slot] + p.recency * (1.0 / (1.0 + age_days / p.recency_days))
        else:  # no clock arithmetic for a term that weighs nothing
            score += w_imp * importance[slot]
        out[node_id] = score if math.isfinite(score) else 0.0
    return out


def _day(ranking: BeingRanking, slot: int) -> str | None:
    """The day a memory belongs to: the label of its `when`'s first entry."""
    day = ranking.day[slot]
    return day if day is not None else first_date(ranking.when_of(slot))


def spread_to_neighbours(
    p: Profile,
    scores: dict[str, float],
    ranking: BeingRanking,
    slots: Mapping[str, int],
    seeds: Sequence[str],
) -> dict[str, float]:
    """Each seed passes a share of its score to the memories noted next to it on the same day
    (`neighbours` each way, `answers` forward from a question), shrinking by `neighbour_decay` per
    step; a memory keeps the best share it is offered (ADR 0008). `slots`: the nodes scored, by
    their slot in `ranking`."""
    seq = ranking.seq
    order = sorted((seq[s], i) for i, s in slots.items() if seq[s] >= 0)
    at = {i: k for k, (_, i) in enumerate(order)}
    days: dict[str, str | None] = {}

    def day_of(node_id: str) -> str | None:
        if node_id not in days:
            days[node_id] = _day(ranking, slots[node_id])
        return days[node_id]

    offered: dict[str, float] = {}
    for seed in seeds:
        if seed not in at:
            continue
        score = scores.get(seed, 0.0)
        day = day_of(seed)
        asks = ranking.asks[slots[seed]]
        for step in range(1, p.neighbour_radius + 1):
            decay = p.neighbour_decay ** (step - 1)
            for k, share in (
                (at[seed] + step, max(p.neighbours, p.answers if asks else 0.0)),
                (at[seed] - step, p.neighbours),
            ):
                if share <= 0 or not 0 <= k < len(order):
                    continue
                other = order[k][1]
                if day_of(other) != day:
                    continue
                offered[other] = max(offered.get(other, 0.0), share * decay * score)
    return {i: s + offered.get(i, 0.0) for i, s in scores.items()}


def fuse_reciprocal(channels: Sequence[Candidates], p: Profile | None = None) -> dict[str, float]:
    """The `rrf` profile's fusion of ranked channels (semantic first, then lexical), without the
    memory columns: Σ weight / (rrf_k + rank), rank from 1. What the context pack ranks notes by
    (ADR 0049): notes have no importance, neighbours or dates. Best first."""
    p = p or PROFILES["rrf"]
    weights = (p.semantic, p.lexical)
    scores: dict[str, float] = {}
    for weight, channel in zip(weights, channels, strict=False):
        for rank, (item, _) in enumerate(channel, 1):
            scores[item] = scores.get(item, 0.0) + weight / (p.rrf_k + rank)
    return dict(sorted(scores.items(), key=lambda s: (-s[1], s[0])))
