"""Retrieval logic measured offline on an ingested LoCoMo data dir (issue #15, ADRs 0082, 0083).

`engram bench locomo --reuse-data DIR` leaves the memories of a LoCoMo file in DIR. This module
reads each question's two channels (the semantic and lexical candidates `query` fuses) once, then
ranks them with `services/ranking.py`'s own `rank` under as many profiles as asked: a profile costs
a `rank` call per question, not a vector search and a full-text statement. Scores are the locomo
bench's (`bench/metrics.py`), per category and per conversation; `cross_validate` picks a variant on
four conversations and scores it on the fifth, for each of the five (leave one conversation out).
"""

from __future__ import annotations

import dataclasses
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
from engram.services.query_text import strip_words
from engram.services.ranking import Profile, rank
from engram.services.reading import MAX_QUERY_CHARS, MEMORY_VIEWS

STATUSES = ("active", "dying")
CANDIDATES = 200
"""Channel depth read once; a profile asking for fewer takes the head of each channel."""
Z95 = 1.96


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


import datetime as _dt  # noqa: E402  (the clock of every ranking: recency weighs nothing in the profiles measured)

_NOW = _dt.datetime(2030, 1, 1, tzinfo=_dt.UTC)
