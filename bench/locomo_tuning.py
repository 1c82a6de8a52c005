"""Retrieval logic measured offline on an ingested LoCoMo data dir (issue #15, ADRs 0082, 0083).

`engram bench locomo --reuse-data DIR` leaves the memories of a LoCoMo file in DIR. This module
reads each question's two channels (the semantic and lexical candidates `query` fuses) once, then
ranks them with `services/ranking.py`'s own `rank` under as many profiles as asked: a profile costs
a `rank` call per question, not a vector search and a full-text statement. Scores are the locomo
bench's (`bench/metrics.py`), per category and per conversation; `cross_validate` picks a variant on
four conversations and scores it on the fifth, for each of the five (leave one conversation out).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import heapq
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from bench import locomo
from bench.locomo import SCORED_CATEGORIES, Conversation
from bench.metrics import score
from bench.run_locomo import being_name
from engram.projections.ranking_cache import BeingRanking
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.query_text import first_date, strip_words
from engram.services.ranking import Profile, rank
from engram.services.reading import MAX_QUERY_CHARS, MEMORY_VIEWS

STATUSES = ("active", "dying")
CANDIDATES = 200
"""Channel depth read once; a profile asking for fewer takes the head of each channel."""
Z95 = 1.96
_NOW = _dt.datetime(2030, 1, 1, tzinfo=_dt.UTC)
"""The clock of every ranking: recency weighs nothing in the profiles measured."""


@dataclass
class Case:
    """One scored question with its channels, as `query` would fuse them."""

    conversation: str
    category: int | str
    text: str
    evidence: tuple[str, ...]
    semantic: list[tuple[str, float]]
    lexical: list[tuple[str, float]]
    ranking: BeingRanking
    refs: Mapping[str, str]
    """Node id → its source reference (the turn's dia_id)."""
    names: frozenset[str] = frozenset()
    """The words of the question that name one of the being's actors (lower case)."""
    actors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Node id → its actors, lower case."""


def open_data(data_dir: Path, base: Settings | None = None) -> Engram:
    base = base or Settings()
    return bootstrap(
        base.model_copy(
            update={"data_dir": data_dir, "llm": "none", "database_url": None, "qdrant_url": None}
        )
    )


def read_cases(engram: Engram, conversations: Sequence[Conversation], depth: int = CANDIDATES) -> list[Case]:
    """Every scored question's channels, read as `Reading.query` reads them (ADR 0008)."""
    cases: list[Case] = []
    search = engram.views.search
    read = search.read
    model = engram.embedder.model_id
    for conv in conversations:
        being_id = engram.reading.being(being_name(conv), MEMORY_VIEWS)
        rows = read.nodes(being_id)
        refs = {str(r["id"]): str(r["source_ref"]) for r in rows}
        actors = {str(r["id"]): str(r["actors"] or "").lower() for r in rows}
        ranking = read.ranking(being_id)
        questions = [q for q in conv.questions if q.evidence and q.category in SCORED_CATEGORIES]
        for q in questions:
            text = q.text[:MAX_QUERY_CHARS].strip()
            names = search.actor_terms(being_id, text)
            [embedding] = engram.embedder.embed([strip_words(text, names)])
            vector = _vector(embedding.data)

            def vectors(vector: Any = vector, being_id: UUID = being_id) -> list[tuple[str, float]]:
                found = engram.views.vectors.similar_nodes(being_id, model, vector, depth, statuses=STATUSES)
                return [(str(i), s) for i, s in found]

            with read.snapshot("memory"):
                lexical, semantic = search.lexical_alongside(
                    vectors, being_id, text, depth, list(STATUSES), actors=names
                )
            cases.append(
                Case(
                    conv.sample_id,
                    q.category,
                    text,
                    q.evidence,
                    semantic,
                    list(lexical),
                    ranking,
                    refs,
                    frozenset(n.lower() for n in names),
                    actors,
                )
            )
    return cases


def _vector(data: bytes) -> Any:
    import numpy as np

    return np.frombuffer(data, dtype="<f4").astype(np.float32)


Ranker = Callable[[Case, int], list[str]]
"""(case, k) → the k best node ids."""


def ranker(p: Profile) -> Ranker:
    def run(case: Case, k: int) -> list[str]:
        n = p.candidates_for(k)
        found = rank(
            p,
            case.ranking,
            case.semantic[:n],
            case.lexical[:n],
            text=case.text,
            k=k,
            statuses=STATUSES,
            now=_NOW,
            actors=case.names,
        )
        return [i for i, _ in found]

    return run


def variant(base: Profile, **changes: Any) -> Profile:
    name = base.name + "".join(f" {k}={v}" for k, v in changes.items())
    return dataclasses.replace(base, name=name, **changes)


@dataclass(frozen=True)
class Figures:
    questions: int
    recall5: float
    recall10: float

    def interval(self) -> float:
        """Half-width of the 95% interval of recall@10 (normal approximation over questions)."""
        p = self.recall10
        return Z95 * math.sqrt(max(p * (1 - p), 0.0) / self.questions) if self.questions else 0.0


def evaluate(cases: Sequence[Case], rank_of: Ranker, k: int = 10) -> dict[str, Any]:
    """recall@5 and @10 overall, per category and per conversation."""
    per_case: list[tuple[Case, float, float]] = []
    for case in cases:
        refs = [case.refs.get(i) for i in rank_of(case, k)]
        s = score(case.evidence, refs, (5, 10))
        per_case.append((case, s.recall[5], s.recall[10]))

    def figures(rows: Sequence[tuple[Case, float, float]]) -> Figures:
        n = len(rows)
        return Figures(
            n, sum(r[1] for r in rows) / n if n else 0.0, sum(r[2] for r in rows) / n if n else 0.0
        )

    return {
        "overall": figures(per_case),
        "categories": {c: figures([r for r in per_case if r[0].category == c]) for c in SCORED_CATEGORIES},
        "conversations": {
            conv: figures([r for r in per_case if r[0].conversation == conv])
            for conv in dict.fromkeys(r[0].conversation for r in per_case)
        },
    }


def objective(result: Mapping[str, Any]) -> float:
    overall: Figures = result["overall"]
    return overall.recall5 + overall.recall10


def cross_validate(cases: Sequence[Case], profiles: Sequence[Profile]) -> dict[str, Any]:
    """Leave one conversation out: the profile best on the other conversations, scored on the one
    left out. Returns the profiles chosen and the held-out figures pooled over the five folds."""
    conversations = list(dict.fromkeys(c.conversation for c in cases))
    chosen: dict[str, str] = {}
    held_out: list[Case] = []
    ranks: dict[str, Ranker] = {}
    for conv in conversations:
        train = [c for c in cases if c.conversation != conv]
        best = max(profiles, key=lambda p: objective(evaluate(train, ranker(p))))
        chosen[conv] = best.name
        ranks[conv] = ranker(best)
        held_out.extend(c for c in cases if c.conversation == conv)

    def by_fold(case: Case, k: int) -> list[str]:
        return ranks[case.conversation](case, k)

    return {"chosen": chosen, "held_out": evaluate(held_out, by_fold)}


def render(name: str, result: Mapping[str, Any]) -> str:
    o: Figures = result["overall"]
    cats = " ".join(f"c{c}={f.recall10:.3f}" for c, f in result["categories"].items())
    convs = " ".join(f"{c[-2:]}={f.recall10:.3f}" for c, f in result["conversations"].items())
    return f"{o.recall5:.4f} {o.recall10:.4f} ±{o.interval():.3f} | {cats} | {convs} | {name}"


def load(path: Path, limit: int | None = None) -> list[Conversation]:
    return locomo.load(path, limit)


# -- directions measured after `rank` (dropped: see ADR 0083) ----------------------------------------


def _scored(p: Profile, case: Case) -> list[tuple[str, float]]:
    """Every memory `rank` scores for the case (its candidates and their neighbours), best first."""
    n = p.candidates_for(10)
    return rank(
        p,
        case.ranking,
        case.semantic[:n],
        case.lexical[:n],
        text=case.text,
        k=1 << 30,
        statuses=STATUSES,
        now=_NOW,
        actors=case.names,
    )


def _day(case: Case, node_id: str) -> str | None:
    slot = case.ranking.slot[node_id]
    day = case.ranking.day[slot]
    return day if day is not None else first_date(case.ranking.when_of(slot))


def by_session(p: Profile, weight: float, turns: int = 1) -> Ranker:
    """Sessions as a second index: a session (a conversation's day) scores the sum of its `turns`
    best memories; each memory gains `weight` x its session's score over the best session's."""

    def run(case: Case, k: int) -> list[str]:
        scores = dict(_scored(p, case))
        per_day: dict[str | None, list[float]] = {}
        for node_id, s in scores.items():
            per_day.setdefault(_day(case, node_id), []).append(s)
        days = {d: sum(heapq.nlargest(turns, v)) for d, v in per_day.items()}
        top = max(days.values(), default=0.0) or 1.0
        scores = {i: s + weight * days[_day(case, i)] / top for i, s in scores.items()}
        return [i for i, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    return run


def spread_over_sessions(p: Profile, keep: float) -> Ranker:
    """Diversity: each further memory of a session already taken keeps `keep` of its score (greedy)."""

    def run(case: Case, k: int) -> list[str]:
        pool = _scored(p, case)[:200]
        taken: dict[str | None, int] = {}
        out: list[str] = []
        while pool and len(out) < k:
            at = max(
                range(len(pool)), key=lambda j: pool[j][1] * keep ** taken.get(_day(case, pool[j][0]), 0)
            )
            node_id, _ = pool.pop(at)
            out.append(node_id)
            day = _day(case, node_id)
            taken[day] = taken.get(day, 0) + 1
        return out

    return run


def along_links(
    p: Profile, links: Mapping[int, list[tuple[str, str, float]]], weight: float, seeds: int
) -> Ranker:
    """Links weighted, not added (ADR 0063 found the added hops hurt): a memory linked to one of the
    `seeds` best gains `weight` x the seed's score x the link's cosine (the best such offer)."""

    def run(case: Case, k: int) -> list[str]:
        scored = _scored(p, case)
        scores = dict(scored)
        best = dict(scored[:seeds])
        offered: dict[str, float] = {}
        for seed, other, cosine in links.get(id(case), []):
            if seed in best:
                offered[other] = max(offered.get(other, 0.0), weight * best[seed] * cosine)
        for other, extra in offered.items():
            scores[other] = scores.get(other, 0.0) + extra
        return [i for i, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    return run


def read_links(
    engram: Engram, conversations: Sequence[Conversation], cases: Sequence[Case], p: Profile
) -> dict[int, list[tuple[str, str, float]]]:
    """Dream every being (the A-MEM links, ADR 0062), then the links of each case's 10 best memories."""
    for conv in conversations:
        engram.sleep.dream(being_name(conv))
    engram.views.ensure()
    beings = {c.sample_id: engram.reading.being(being_name(c), MEMORY_VIEWS) for c in conversations}
    out: dict[int, list[tuple[str, str, float]]] = {}
    for case in cases:
        seeds = [i for i, _ in _scored(p, case)[:10]]
        out[id(case)] = [
            (str(r["memory_id"]), str(r["other_id"]), float(r["score"]))
            for r in engram.views.links.links_of(beings[case.conversation], seeds)
            if r["other_kind"] == "node"
        ]
    return out


WEIGHT_GRID: dict[str, tuple[Any, ...]] = {
    "semantic": (0.3, 0.8),
    "lexical_power": (1.5, 3.0),
    "neighbours": (0.15, 0.5),
    "dates": (0.2, 0.8),
    "candidates": (50, 150, 200),
}
"""The default's other weights, one at a time, around today's values."""


def _lexical_without_names(
    engram: Engram, conversations: Sequence[Conversation], cases: Sequence[Case]
) -> dict[int, Case]:
    """Each case with its full-text candidates read without the names it holds (the speaker weight
    alone then carries them)."""
    beings = {c.sample_id: engram.reading.being(being_name(c), MEMORY_VIEWS) for c in conversations}
    out: dict[int, Case] = {}
    for case in cases:
        lexical = case.lexical
        if case.names:
            text = strip_words(case.text, case.names)
            lexical = list(engram.views.search.lexical(beings[case.conversation], text, CANDIDATES))
        out[id(case)] = dataclasses.replace(case, lexical=lexical)
    return out


# -- the command --------------------------------------------------------------------------------------


def as_json(result: Mapping[str, Any]) -> dict[str, Any]:
    def one(f: Figures) -> dict[str, Any]:
        return {
            "questions": f.questions,
            "recall": {"5": round(f.recall5, 4), "10": round(f.recall10, 4)},
            "interval_10": round(f.interval(), 3),
        }

    return {
        "overall": one(result["overall"]),
        "categories": {str(c): one(f) for c, f in result["categories"].items()},
        "conversations": {c: one(f) for c, f in result["conversations"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path, help="a LoCoMo-format file (the development split)")
    parser.add_argument(
        "--reuse-data",
        type=Path,
        required=True,
        help="a data dir `engram bench locomo PATH --reuse-data DIR` ingested",
    )
    parser.add_argument("--links", action="store_true", help="dream in DIR first and measure links weighted")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    from bench.report import machine, now_utc
    from engram.adapters.logging import configure_logging
    from engram.services.ranking import PROFILES

    configure_logging("warning")

    conversations = load(args.path)
    default = PROFILES["default"]
    today = dataclasses.replace(default, name="default before #15", speaker=0.0)
    engram = open_data(args.reuse_data)
    try:
        cases = read_cases(engram, conversations)
        apart = _lexical_without_names(engram, conversations, cases)
        links = read_links(engram, conversations, cases, default) if args.links else {}
    finally:
        engram.close()
    speakers = [
        dataclasses.replace(today, name=f"speaker {w}", speaker=w)
        for w in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5)
    ]

    def _names_apart(p: Profile) -> Ranker:
        plain = ranker(p)

        def run(case: Case, k: int) -> list[str]:
            return plain(apart[id(case)], k)

        return run

    rankers: list[tuple[str, Ranker]] = [(today.name, ranker(today)), ("default", ranker(default))]
    rankers += [(p.name, ranker(p)) for p in speakers]
    rankers += [(f"default + sessions {w}", by_session(default, w)) for w in (0.1, 0.2, 0.4)]
    rankers += [(f"default + one session keeps {x}", spread_over_sessions(default, x)) for x in (0.97, 0.9)]
    rankers += (
        [(f"default + links {w} from top 3", along_links(default, links, w, 3)) for w in (0.05, 0.1, 0.2)]
        if args.links
        else []
    )
    weights = [
        variant(default, **{field: value})
        for field, values in WEIGHT_GRID.items()
        for value in values
        if getattr(default, field) != value
    ]
    rankers += [(p.name, ranker(p)) for p in weights]
    rankers += [
        (f"default, names out of the full-text query {p.speaker}", _names_apart(p)) for p in speakers[2:5]
    ]
    results = {name: evaluate(cases, r) for name, r in rankers}
    cv = cross_validate(cases, speakers)
    results["speaker weight, leave one conversation out"] = cv["held_out"]
    for name, result in results.items():
        print(render(name, result), flush=True)
    print(f"chosen per held-out conversation: {cv['chosen']}")
    report = {
        "benchmark": "locomo-logic",
        "date": now_utc(),
        "machine": machine(),
        "dataset": {"path": str(args.path), "questions": len(cases)},
        "cross_validation": cv["chosen"],
        "variants": {name: as_json(r) for name, r in results.items()},
    }
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
