"""Query-side variants of `engram bench locomo-logic --feedback` (issue #15, second round; ADRs 0090, 0091).

What `query` could do with the candidates and channels it already has, measured on the cases
`bench/locomo_tuning.py` reads once:

- **dense pseudo-relevance feedback** (Rocchio): the query vector moved towards the mean vector of
  the `top` best memories of the first ranking, a second dense search with it, its candidates
  replacing the first search's or joined to them, then `rank` again;
- **lexical feedback**: the words of the `top` best memories (by count among them x idf in the
  being) searched as a second full-text query, its relevance added to the first with a low weight;
- **more question words out of the full-text query** ("would", "likely", "kind"…);
- the multi-hop misses written out for reading (`--misses FILE`).

The second dense search is brute force over the being's memory vectors (numpy, exact), which a
LoCoMo conversation's ~600 memories allow; the vector index's HNSW search is the same at this size.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np

from bench.locomo import Conversation
from bench.locomo_tuning import (
    CANDIDATES,
    STATUSES,
    Case,
    Ranker,
    _scored,
    evaluate,
    objective,
    ranker,
)
from bench.metrics import score
from bench.run_locomo import being_name
from engram.projections.fulltext.terms import query_terms
from engram.projections.vectors import nodes_alias
from engram.services.bootstrap import Engram
from engram.services.query_text import first_date, strip_words
from engram.services.ranking import Profile
from engram.services.reading import MEMORY_VIEWS

Vector = np.ndarray[Any, np.dtype[np.float32]]


@dataclass
class Memories:
    """One being's memories: their ids, unit vectors (rows of `matrix`), texts and words."""

    ids: list[str]
    matrix: Vector
    texts: dict[str, str]
    words: dict[str, list[str]]
    idf: dict[str, float]

    def __post_init__(self) -> None:
        self.row = {i: r for r, i in enumerate(self.ids)}

    def search(self, vector: Vector, limit: int) -> list[tuple[str, float]]:
        """Exact cosine top `limit`, best first (the vectors are unit length)."""
        cos = self.matrix @ (vector / (np.linalg.norm(vector) or 1.0))
        limit = min(limit, len(self.ids))
        top = np.argpartition(-cos, limit - 1)[:limit]
        top = top[np.argsort(-cos[top], kind="stable")]
        return [(self.ids[j], float(cos[j])) for j in top]

    def centroid(self, ids: Sequence[str]) -> Vector | None:
        rows = [self.row[i] for i in ids if i in self.row]
        return self.matrix[rows].mean(axis=0) if rows else None


def read_memories(engram: Engram, conversations: Sequence[Conversation]) -> dict[str, Memories]:
    """Each conversation's memory vectors (from the vector index) and texts, active and dying."""
    model = engram.embedder.model_id
    out: dict[str, Memories] = {}
    for conv in conversations:
        being_id = engram.reading.being(being_name(conv), MEMORY_VIEWS)
        rows = [r for r in engram.views.search.read.nodes(being_id) if r["status"] in STATUSES]
        points = engram.views.vectors.index.retrieve(
            nodes_alias(model), being_id, [UUID(str(r["id"])) for r in rows], with_vectors=True
        )
        vectors = {str(p.id): p.vector for p in points if p.vector is not None}
        ids = [str(r["id"]) for r in rows if str(r["id"]) in vectors]
        matrix = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        texts = {str(r["id"]): str(r["action"] or "") for r in rows}
        words = {i: query_terms(t) for i, t in texts.items()}
        df = Counter(w for ws in words.values() for w in set(ws))
        n = len(words)
        idf = {w: math.log(n / c) for w, c in df.items()}
        out[conv.sample_id] = Memories(ids, matrix, texts, words, idf)
    return out


# -- dense feedback -----------------------------------------------------------------------------------


def feedback_semantic(
    p: Profile, case: Case, memories: Memories, top: int, weight: float, join: bool, source: str = "fused"
) -> list[tuple[str, float]]:
    """The semantic channel after Rocchio feedback: q' = q/|q| + weight x mean(top memories' vectors),
    searched again; `join`: the first search's candidates stay, each id keeping its best cosine."""
    n = p.candidates_for(10)
    seeds = (
        [i for i, _ in _scored(p, case)[:top]] if source == "fused" else [i for i, _ in case.semantic[:top]]
    )
    centroid = memories.centroid(seeds)
    if centroid is None or case.vector is None:
        return case.semantic[:n]
    q = case.vector / (np.linalg.norm(case.vector) or 1.0)
    second = memories.search(q + weight * centroid, n)
    if not join:
        return second
    best = dict(case.semantic[:n])
    for i, s in second:
        best[i] = max(best.get(i, -1.0), s)
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


def dense_feedback(
    p: Profile,
    memories: Mapping[str, Memories],
    top: int,
    weight: float,
    join: bool,
    source: str = "fused",
) -> Ranker:
    def run(case: Case, k: int) -> list[str]:
        n = p.candidates_for(k)
        semantic = feedback_semantic(p, case, memories[case.conversation], top, weight, join, source)
        return _rank(p, case, semantic, case.lexical[:n], k)

    return run


def _rank(
    p: Profile,
    case: Case,
    semantic: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    k: int,
) -> list[str]:
    """`ranker(p)` on the case with other channels."""
    return ranker(p)(dataclasses.replace(case, semantic=list(semantic), lexical=list(lexical)), k)


# -- lexical feedback ---------------------------------------------------------------------------------


def expansion_terms(p: Profile, case: Case, memories: Memories, top: int, terms: int) -> list[str]:
    """The `terms` words of the `top` best memories most worth adding: count among them x idf,
    leaving out the query's own words, the names it holds and numbers."""
    own = set(query_terms(case.text)) | set(case.names)
    counts: Counter[str] = Counter()
    for i, _ in _scored(p, case)[:top]:
        counts.update(w for w in set(memories.words.get(i, [])) if w not in own and not w.isdigit())
    scored = {w: c * memories.idf.get(w, 0.0) for w, c in counts.items()}
    return [w for w, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]]


def read_expansions(
    engram: Engram,
    conversations: Sequence[Conversation],
    cases: Sequence[Case],
    memories: Mapping[str, Memories],
    p: Profile,
    settings: Sequence[tuple[int, int]],
) -> dict[tuple[int, int], dict[int, list[tuple[str, float]]]]:
    """For each (top, terms) of `settings`, each case's second full-text search (its expansion words)."""
    beings = {c.sample_id: engram.reading.being(being_name(c), MEMORY_VIEWS) for c in conversations}
    out: dict[tuple[int, int], dict[int, list[tuple[str, float]]]] = {}
    for top, terms in settings:
        found: dict[int, list[tuple[str, float]]] = {}
        for case in cases:
            words = expansion_terms(p, case, memories[case.conversation], top, terms)
            found[id(case)] = (
                list(engram.views.search.lexical(beings[case.conversation], " ".join(words), CANDIDATES))
                if words
                else []
            )
        out[(top, terms)] = found
    return out


def joined_lexical(
    case: Case, second: Mapping[int, list[tuple[str, float]]], weight: float, n: int
) -> list[tuple[str, float]]:
    """The full-text channel plus `weight` x the expansion search's relevance (each over its best)."""
    first = case.lexical[:n]
    extra = second.get(id(case), [])[:n]
    top1 = max((s for _, s in first), default=0.0) or 1.0
    top2 = max((s for _, s in extra), default=0.0) or 1.0
    joined: dict[str, float] = {i: s / top1 for i, s in first}
    for i, s in extra:
        joined[i] = joined.get(i, 0.0) + weight * s / top2
    return sorted(joined.items(), key=lambda kv: (-kv[1], kv[0]))


def lexical_feedback(p: Profile, second: Mapping[int, list[tuple[str, float]]], weight: float) -> Ranker:
    def run(case: Case, k: int) -> list[str]:
        n = p.candidates_for(k)
        return _rank(p, case, case.semantic[:n], joined_lexical(case, second, weight, n), k)

    return run


QUESTION_WORDS = frozenset(
    [
        "would",
        "could",
        "might",
        "likely",
        "kind",
        "type",
        "sort",
        "many",
        "much",
        "ever",
        "also",
        "think",
        "thinks",
        "feel",
        "feels",
        "something",
        "anything",
        "things",
        "thing",
        "get",
        "got",
        "go",
        "went",
    ]
)
"""Words of a question that say what is asked, not what about (not in PostgreSQL's stop words)."""


def read_plain_lexical(
    engram: Engram, conversations: Sequence[Conversation], cases: Sequence[Case]
) -> dict[int, list[tuple[str, float]]]:
    """Each case's full-text candidates with `QUESTION_WORDS` out of the query as well."""
    beings = {c.sample_id: engram.reading.being(being_name(c), MEMORY_VIEWS) for c in conversations}
    out: dict[int, list[tuple[str, float]]] = {}
    for case in cases:
        text = strip_words(case.text, QUESTION_WORDS)
        out[id(case)] = (
            case.lexical
            if text == case.text
            else list(
                engram.views.search.lexical(beings[case.conversation], text, CANDIDATES, actors=case.names)
            )
        )
    return out


def with_lexical(p: Profile, lexical: Mapping[int, list[tuple[str, float]]]) -> Ranker:
    def run(case: Case, k: int) -> list[str]:
        n = p.candidates_for(k)
        return _rank(p, case, case.semantic[:n], lexical[id(case)][:n], k)

    return run


# -- choosing and reading -----------------------------------------------------------------------------


def cross_validate_rankers(cases: Sequence[Case], rankers: Sequence[tuple[str, Ranker]]) -> dict[str, Any]:
    """Leave one conversation out over rankers (not only profiles): the best on four conversations,
    scored on the fifth, pooled."""
    conversations = list(dict.fromkeys(c.conversation for c in cases))
    per_conv = {
        name: {conv: evaluate([c for c in cases if c.conversation == conv], r) for conv in conversations}
        for name, r in rankers
    }
    chosen: dict[str, str] = {}
    by_name = dict(rankers)
    for conv in conversations:

        def train_score(name: str, conv: str = conv) -> float:
            # the objective summed over the other conversations, each weighted by its questions
            total = 0.0
            for other, result in per_conv[name].items():
                if other != conv:
                    total += objective(result) * result["overall"].questions
            return total

        chosen[conv] = max((name for name, _ in rankers), key=train_score)

    def by_fold(case: Case, k: int) -> list[str]:
        return by_name[chosen[case.conversation]](case, k)

    return {"chosen": chosen, "held_out": evaluate(cases, by_fold)}


def write_misses(path: Path, cases: Sequence[Case], memories: Mapping[str, Memories], p: Profile) -> int:
    """Category-1 questions whose evidence is not all in the default's top 10: the question, each
    evidence turn with its rank among everything scored, and the five first instead (JSON lines)."""
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for case in cases:
            if case.category != 1:
                continue
            scored = [i for i, _ in _scored(p, case)]
            refs = [case.refs.get(i) for i in scored]
            if score(case.evidence, refs[:10], (10,)).recall[10] >= 1.0:
                continue
            by_ref = {case.refs[i]: i for i in case.refs}
            m = memories[case.conversation]
            evidence = []
            for e in case.evidence:
                node = by_ref.get(e)
                evidence.append(
                    {
                        "ref": e,
                        "rank": refs.index(e) + 1 if e in refs else None,
                        "text": m.texts.get(node, "") if node else "(no such turn)",
                    }
                )
            first = [{"ref": case.refs.get(i), "text": m.texts.get(i, "")} for i in scored[:5]]
            line = {
                "conversation": case.conversation,
                "question": case.text,
                "evidence": evidence,
                "first": first,
            }
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            written += 1
    return written


# -- what the multi-hop misses suggested: the first memory of a day --------------------------------


def first_of_day(ranking: Any) -> frozenset[str]:
    """The ids of the memories noted first on their day (the lowest `seq` of each day)."""
    first: dict[str | None, tuple[int, str]] = {}
    for node_id, slot in ranking.slot.items():
        seq = ranking.seq[slot]
        if seq < 0:
            continue
        day = ranking.day[slot]
        if day is None:
            day = first_date(ranking.when_of(slot))
        if day not in first or seq < first[day][0]:
            first[day] = (seq, node_id)
    return frozenset(i for _, i in first.values())


def openers(
    p: Profile,
    weight: float,
    scale: bool = False,
    lexical: Mapping[int, list[tuple[str, float]]] | None = None,
) -> Ranker:
    """A day's first memory (where a conversation's news is told) gains `weight` (`scale`: gains
    `weight` x its own score). `lexical`: each case's full-text channel in place of its own."""
    cache: dict[int, frozenset[str]] = {}

    def run(case: Case, k: int) -> list[str]:
        if lexical is not None:
            case = dataclasses.replace(case, lexical=lexical[id(case)])
        key = id(case.ranking)
        if key not in cache:
            cache[key] = first_of_day(case.ranking)
        first = cache[key]
        scores = {
            i: (s * (1 + weight) if scale else s + weight) if i in first else s for i, s in _scored(p, case)
        }
        return [i for i, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    return run


def per_question(cases: Sequence[Case], rank_of: Ranker) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Each question's recall@5 and @10 (rows), in the order of `cases`."""
    out = np.zeros((len(cases), 2), dtype=np.float64)
    for n, case in enumerate(cases):
        refs = [case.refs.get(i) for i in rank_of(case, 10)]
        s = score(case.evidence, refs, (5, 10))
        out[n] = (s.recall[5], s.recall[10])
    return out


def paired_difference(
    cases: Sequence[Case], variant: Ranker, base: Ranker, rounds: int = 2000, seed: int = 15
) -> dict[str, list[float]]:
    """The gain of `variant` over `base` at 5 and 10, with its 95% interval by a paired bootstrap over
    the questions (both ranked on the same questions, so their noise is mostly shared)."""
    diff = per_question(cases, variant) - per_question(cases, base)
    rng = np.random.default_rng(seed)
    means = np.array([diff[rng.integers(0, len(diff), len(diff))].mean(axis=0) for _ in range(rounds)])
    lo, hi = np.percentile(means, [2.5, 97.5], axis=0)
    mean = diff.mean(axis=0)
    return {
        k: [round(float(mean[j]), 4), round(float(lo[j]), 4), round(float(hi[j]), 4)]
        for j, k in enumerate(("5", "10"))
    }
