"""Reading memory (spec 000, "Recall Flow" and "Context Structure"), each call scoped to one being.

Reads that reach nodes reactivate them (spec ❺'s table): `recall` +1, `recall_memory` and
`search_memory` +1 for live nodes and +2 for dead ones; `query` +1 unless `reactivate=False`
(auditors, benchmarks). Every read first makes sure the views include the latest writes.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import numpy as np
from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.scene import Scene
from engram.domain.text import check_text
from engram.projections.queries import ReadModels
from engram.projections.ranking_cache import BeingRanking
from engram.services.beings import resolve_being_id
from engram.services.errors import NotFound
from engram.services.ports import Reads
from engram.services.query_text import (
    DateSpan,
    date_closeness,
    first_date,
    node_dates,
    query_dates,
    strip_words,
)
from engram.services.ranking import Profile, profile
from engram.services.thresholds import thresholds_for

RECALL_LIMIT = 3
MEMORY_VIEWS = ("memory", "vectors")  # what recall and query read
MAX_QUERY_K = 100
MAX_QUERY_CHARS = 4000
MAX_SEARCH_TERMS = 20
RECENT_NODES = 5
DIARY_DAYS = 7


class NodeView(BaseModel):
    id: str
    cluster_id: str
    status: str
    action: str
    feeling: str
    scene: dict[str, Any]
    themes: list[str]
    emotion: dict[str, float] | None
    importance: float
    pinned: bool
    fresh: bool
    reactivation_count: int
    last_activated_at: str
    source_ref: str | None
    source_note_id: str | None
    score: float | None = None

    @classmethod
    def of(cls, row: dict[str, Any], score: float | None = None) -> NodeView:
        return cls(
            id=row["id"],
            cluster_id=row["cluster_id"],
            status=row["status"],
            action=row["action"],
            feeling=row["feeling"] or "",
            scene=row["scene"],
            themes=row["themes"],
            emotion=row["emotion"],
            importance=row["importance"],
            pinned=row["pinned"],
            fresh=row["fresh"],
            reactivation_count=row["reactivation_count"],
            last_activated_at=row["last_activated_at"],
            source_ref=row["source_ref"],
            source_note_id=row["source_note_id"],
            score=score,
        )


class Recalled(BaseModel):
    text: str = Field(description="The fragment stream wrapped in <memory>…</memory>, or empty.")
    nodes: list[NodeView]
    position: int | None = None


class Found(BaseModel):
    nodes: list[NodeView]
    position: int | None = None


class ContextView(BaseModel):
    being: str
    system_prompt: dict[str, Any]
    snapshot: dict[str, Any]
    recent_nodes: list[dict[str, Any]]
    text: str


def fragments(nodes: Sequence[NodeView], rng: random.Random) -> str:
    """The spec's fragment mode: all actions and feelings, shuffled together (Fisher–Yates), ` / `-joined."""
    parts = [p for n in nodes for p in (n.action, n.feeling) if p]
    for i in range(len(parts) - 1, 0, -1):
        j = rng.randint(0, i)
        parts[i], parts[j] = parts[j], parts[i]
    return f"<memory>{' / '.join(parts)}</memory>" if parts else ""


class Reading:
    def __init__(self, engram: Reads, rng: random.Random | None = None) -> None:
        self.e = engram
        self.rng = rng or random.Random()

    # -- helpers -------------------------------------------------------------------------------

    def _being(self, ref: str, views: Sequence[str] | None = None) -> UUID:
        """The being's id, once the views it reads (`views`, default all) include the latest writes."""
        being_id = resolve_being_id(self.e.store, ref)
        self.e.views.ensure(names=views, being=being_id)
        return being_id

    def _reactivate(
        self, being_id: UUID, rows: Sequence[dict[str, Any]], source: ReactivationSource
    ) -> int | None:
        if not rows:
            return None

        def handle() -> int | None:
            being, nodes = self.e.store.get_being_and_many(
                MemoryNode, [UUID(r["id"]) for r in rows], being_id
            )
            at = self.e.clock.now()
            for node in nodes:
                node.reactivate(source, being.cycle, at)
            # A reactivation is a touch: its commit need not wait for the disk (ADR 0018).
            return self.e.store.save(*nodes, durable=False)

        return self.e.runner.run(f"reactivate_{source.value}", handle, being_id=being_id)

    def _vector(self, text: str) -> tuple[str, np.ndarray[Any, np.dtype[np.float32]]]:
        [embedding] = self.e.embedder.embed([text])
        return embedding.model, np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)

    @staticmethod
    def _check_text(text: str) -> str:
        text = text.strip()
        if not text:
            raise InvalidInput("the query text must not be empty")
        check_text("query", text)
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidInput(f"the query text has at most {MAX_QUERY_CHARS} characters")
        return text

    # -- the spec's tools ----------------------------------------------------------------------

    def recall(
        self,
        being_ref: str,
        text: str,
        *,
        vector: np.ndarray[Any, np.dtype[np.float32]] | None = None,
    ) -> Recalled:
        """Vector search over active and dying nodes (threshold per embedder), at most 3, each reactivated +1.

        `vector`: the text's embedding by the configured embedder, when the caller already has it.
        """
        text = self._check_text(text)
        being_id = self._being(being_ref, MEMORY_VIEWS)
        model = self.e.embedder.model_id
        if vector is None:
            model, vector = self._vector(text)
        threshold = thresholds_for(model).recall
        hits = self.e.views.vectors.similar_nodes(
            being_id, model, vector, RECALL_LIMIT, statuses=["active", "dying"], threshold=threshold
        )
        rows = {r["id"]: r for r in self.e.views.read.nodes(being_id, ids=[h for h, _ in hits])}
        nodes = [NodeView.of(rows[str(h)], score) for h, score in hits if str(h) in rows]
        position = self._reactivate(being_id, [rows[n.id] for n in nodes], ReactivationSource.RECALL)
        return Recalled(text=fragments(nodes, self.rng), nodes=nodes, position=position)

    def recall_memory(self, being_ref: str, cluster_id: UUID) -> Found:
        """A cluster's nodes; active +1, dead +2."""
        being_id = self._being(being_ref)
        if self.e.views.read.cluster(being_id, cluster_id) is None:
            raise NotFound(f"cluster {cluster_id} not found")
        rows = self.e.views.read.nodes(being_id, cluster_id=cluster_id, order="recent")
        position = self._reactivate(being_id, rows, ReactivationSource.RECALL_MEMORY)
        return Found(nodes=[NodeView.of(r) for r in rows], position=position)

    def search_memory(
        self, being_ref: str, terms: Sequence[str] | str, mode: str = "or", limit: int = 50
    ) -> Found:
        """Keyword search (spec's fields and semantics); active +1, dead +2."""
        if mode not in ("or", "and"):
            raise InvalidInput("mode is 'or' or 'and'")
        words = terms.split() if isinstance(terms, str) else [t for t in terms if t.strip()]
        if not words:
            raise InvalidInput("give at least one search term")
        if len(words) > MAX_SEARCH_TERMS:
            raise InvalidInput(f"at most {MAX_SEARCH_TERMS} search terms")
        for word in words:
            check_text("a search term", word)
        if not 1 <= limit <= MAX_QUERY_K:
            raise InvalidInput(f"limit is between 1 and {MAX_QUERY_K}")
        being_id = self._being(being_ref)
        rows = self.e.views.read.search(being_id, words, mode, limit)
        position = self._reactivate(being_id, rows, ReactivationSource.SEARCH_MEMORY)
        return Found(nodes=[NodeView.of(r) for r in rows], position=position)

    def query(
        self,
        being_ref: str,
        text: str,
        k: int = 10,
        *,
        profile_name: str = "default",
        include_dead: bool = False,
        reactivate: bool = True,
        vector: np.ndarray[Any, np.dtype[np.float32]] | None = None,
    ) -> Found:
        """Ranked retrieval: semantic + lexical (full-text index) + dates + neighbours + importance +
        recency, by profile (ADR 0008)."""
        if not 1 <= k <= MAX_QUERY_K:
            raise InvalidInput(f"k is between 1 and {MAX_QUERY_K}")
        p = profile(profile_name)
        text = self._check_text(text)
        being_id = self._being(being_ref, MEMORY_VIEWS)
        read = self.e.views.read
        statuses = ["active", "dying", *(["dead"] if include_dead else [])]
        n = max(p.candidates, k)
        names = read.actor_terms(being_id, text) if p.actors_apart else set()
        model = self.e.embedder.model_id
        if p.semantic > 0 and vector is None:  # names are matched on the actors field, not in the vectors
            model, vector = self._vector(strip_words(text, names))

        def search_vectors() -> list[tuple[str, float]]:
            if p.semantic <= 0 or vector is None:
                return []
            found = self.e.views.vectors.similar_nodes(being_id, model, vector, n, statuses=statuses)
            return [(str(i), s) for i, s in found]

        with read.snapshot("memory") as snapshot:  # one read transaction for the statements below
            if p.lexical > 0:  # the vector search runs while the full-text statements do (ADR 0017)
                lexical, semantic = snapshot.lexical_alongside(
                    search_vectors, being_id, text, n, statuses, actors=names
                )
            else:
                lexical, semantic = [], search_vectors()
            best, full = self._rank(snapshot, p, being_id, text, k, statuses, semantic, lexical)
        hits = [NodeView.of(full[i], s) for i, s in best if i in full]
        position = (
            self._reactivate(being_id, [full[h.id] for h in hits], ReactivationSource.QUERY)
            if reactivate
            else None
        )
        return Found(nodes=hits, position=position)

    def _rank(
        self,
        read: ReadModels,
        p: Profile,
        being_id: UUID,
        text: str,
        k: int,
        statuses: list[str],
        semantic: list[tuple[str, float]],
        lexical: list[tuple[str, float]],
    ) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]]]:
        """`query`'s `k` best (id, score) and their nodes, from both channels' hits and `read`."""
        ranking = read.ranking(being_id)
        slots = ranking.slots(i for i, _ in lexical)
        slots.update(ranking.slots(i for i, _ in semantic if i not in slots))  # each id looked up once
        now = self.e.clock.now()
        dates = query_dates(text) if p.dates > 0 else []
        scores = combine(p, semantic, lexical, ranking, slots, now, dates)
        if slots and (p.neighbours > 0 or p.answers > 0):
            seeds = [i for i, _ in best_of(scores, p.neighbour_seeds)]
            extra = {
                i: s for i, s in ranking.around(seeds, p.neighbour_radius, statuses).items() if i not in slots
            }
            slots.update(extra)
            scores.update(combine(p, semantic, lexical, ranking, extra, now, dates))
            scores = spread_to_neighbours(p, scores, ranking, slots, seeds)
        if p.question_penalty > 0:
            asks, keep = ranking.asks, 1 - p.question_penalty
            scores = {i: s * keep if asks[slots[i]] else s for i, s in scores.items()}
        best = best_of(scores, k)
        full = {r["id"]: r for r in read.nodes(being_id, ids=[UUID(i) for i, _ in best])}
        return best, full

    # -- context -------------------------------------------------------------------------------

    def context(self, being_ref: str) -> ContextView:
        being_id = self._being(being_ref)
        read = self.e.views.read
        being = read.being(being_id)
        assert being is not None
        notes = read.notes(
            being_id, kinds=["rule", "preference", "relationship", "todo", "reminder", "knowledge"]
        )
        today = self.e.clock.now().date()
        since = (today - _dt.timedelta(days=DIARY_DAYS - 1)).isoformat()
        system_prompt = {
            "soul": being["soul"],
            "think_md": being["think_md"],
            "rules": [n["text"] for n in notes if n["kind"] == "rule" and n["enabled"]],
            "preferences": [n["text"] for n in notes if n["kind"] == "preference" and n["enabled"]],
            "relationships": [n["text"] for n in notes if n["kind"] == "relationship" and n["enabled"]],
        }
        snapshot = {
            "unread": [
                {"kind": n["kind"], "text": n["text"], "id": n["id"]}
                for n in notes
                if n["kind"] in ("todo", "reminder") and not n["read"]
            ],
            "knowledge": [n["text"] for n in notes if n["kind"] == "knowledge" and n["enabled"]],
            "diary": [{"date": d["date"], "text": d["text"]} for d in read.diary(being_id, since)],
        }
        recent = [
            r
            for r in read.nodes(
                being_id, statuses=["active", "dying"], order="recent", limit=RECENT_NODES * 4
            )
            if (r["action"] or "").strip()
        ][:RECENT_NODES]
        recent_nodes = [
            {
                "id": r["id"],
                "text": Scene.model_validate(r["scene"]).to_text(r["feeling"] or ""),
                "source_ref": r["source_ref"],
            }
            for r in recent
        ]
        return ContextView(
            being=being["name"],
            system_prompt=system_prompt,
            snapshot=snapshot,
            recent_nodes=recent_nodes,
            text=render_context(system_prompt, snapshot, recent_nodes),
        )


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


def _day(ranking: BeingRanking, slot: int) -> str | None:
    """The day a memory belongs to: the label of its `when`'s first entry."""
    day = ranking.day[slot]
    return day if day is not None else first_date(ranking.when_of(slot))


def combine(
    p: Profile,
    semantic: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    ranking: BeingRanking,
    slots: Mapping[str, int],
    now: _dt.datetime,
    dates: Sequence[DateSpan] = (),
) -> dict[str, float]:
    """The score of each node of `slots` (its slot in `ranking`) from its channel scores or ranks, by
    the profile's fusion (ADR 0008)."""
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
                w / (p.rrf_k + rank[node_id])
                for w, rank in ((w_sem, sem_rank), (w_lex, lex_rank))
                if node_id in rank
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


def render_context(
    system_prompt: dict[str, Any], snapshot: dict[str, Any], recent: list[dict[str, Any]]
) -> str:
    lines = ["# System prompt (Block 1-A)", system_prompt["soul"] or "(no soul defined)"]
    if system_prompt["think_md"]:
        lines += ["", "## Notes from my last reflection", system_prompt["think_md"]]
    for title, key in (
        ("Rules", "rules"),
        ("Preferences", "preferences"),
        ("Relationships", "relationships"),
    ):
        if system_prompt[key]:
            lines += ["", f"## {title}", *(f"- {t}" for t in system_prompt[key])]
    lines += ["", "# Snapshot (Block 1-B)"]
    if snapshot["unread"]:
        lines += ["## Unread", *(f"- [{n['kind']}] {n['text']}" for n in snapshot["unread"])]
    if snapshot["knowledge"]:
        lines += ["## Knowledge", *(f"- {t}" for t in snapshot["knowledge"])]
    if snapshot["diary"]:
        lines += ["## Diary", *(f"{d['date']}: {d['text']}" for d in snapshot["diary"])]
    lines += ["", "# Recent memories (Block 2-B)", *(f"- {n['text']}" for n in recent)]
    return "\n".join(lines)
