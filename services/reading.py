"""The agent's memory tools (spec 000, "Recall Flow" and "Context Structure"), each call scoped to one being.

`recall`, `recall_memory`, `search_memory`, `query` and `context`. They validate what the caller
gives, search (the vector index; the full-text index, `projections/fulltext/`), leave the scoring to
`services/ranking.py`, and record the reactivations. Reads that reach nodes reactivate them (spec
❺'s table): `recall` +1, `recall_memory` and `search_memory` +1 for live nodes and +2 for dead ones;
`query` +1 unless `reactivate=False` (auditors, benchmarks). Every read first makes sure the views
include the latest writes.
"""

from __future__ import annotations

import datetime as _dt
import random
import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np
from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.scene import Scene
from engram.domain.text import check_text
from engram.services.beings import resolve_being_id
from engram.services.errors import NotFound
from engram.services.ports import Reads
from engram.services.query_text import strip_words
from engram.services.ranking import profile, rank
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
        # One reactivation of a being at a time in this process: concurrent reads of one being reactivate
        # the same nodes, and as racing writers they used up their retries (eight at once, issue #7).
        self._reactivating: dict[UUID, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    # -- the tools' building blocks (public: `engram bench recall` times them one by one) --------

    def being(self, ref: str, views: Sequence[str] | None = None) -> UUID:
        """The being's id, once the views it reads (`views`, default all) include the latest writes."""
        being_id = resolve_being_id(self.e.store, ref)
        self.e.views.ensure(names=views, being=being_id)
        return being_id

    def reactivate(
        self, being_id: UUID, rows: Sequence[dict[str, Any]], source: ReactivationSource
    ) -> int | None:
        """Reactivate the nodes of `rows` (view rows with an `id`) as `source` did; the log position."""
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

        with self._locks_lock:
            lock = self._reactivating.setdefault(being_id, threading.Lock())
        with lock:
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
        being_id = self.being(being_ref, MEMORY_VIEWS)
        model = self.e.embedder.model_id
        if vector is None:
            model, vector = self._vector(text)
        threshold = thresholds_for(model).recall
        hits = self.e.views.vectors.similar_nodes(
            being_id, model, vector, RECALL_LIMIT, statuses=["active", "dying"], threshold=threshold
        )
        rows = {r["id"]: r for r in self.e.views.read.nodes(being_id, ids=[h for h, _ in hits])}
        nodes = [NodeView.of(rows[str(h)], score) for h, score in hits if str(h) in rows]
        position = self.reactivate(being_id, [rows[n.id] for n in nodes], ReactivationSource.RECALL)
        return Recalled(text=fragments(nodes, self.rng), nodes=nodes, position=position)

    def recall_memory(self, being_ref: str, cluster_id: UUID) -> Found:
        """A cluster's nodes; active +1, dead +2."""
        being_id = self.being(being_ref)
        if self.e.views.read.cluster(being_id, cluster_id) is None:
            raise NotFound(f"cluster {cluster_id} not found")
        rows = self.e.views.read.nodes(being_id, cluster_id=cluster_id, order="recent")
        position = self.reactivate(being_id, rows, ReactivationSource.RECALL_MEMORY)
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
        being_id = self.being(being_ref)
        rows = self.e.views.search.keywords(being_id, words, mode, limit)
        position = self.reactivate(being_id, rows, ReactivationSource.SEARCH_MEMORY)
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
        being_id = self.being(being_ref, MEMORY_VIEWS)
        search = self.e.views.search
        read = search.read
        statuses = ["active", "dying", *(["dead"] if include_dead else [])]
        n = p.candidates_for(k)
        names = search.actor_terms(being_id, text) if p.actors_apart else set()
        model = self.e.embedder.model_id
        if p.semantic > 0 and vector is None:  # names are matched on the actors field, not in the vectors
            model, vector = self._vector(strip_words(text, names))

        def search_vectors() -> list[tuple[str, float]]:
            if p.semantic <= 0 or vector is None:
                return []
            found = self.e.views.vectors.similar_nodes(being_id, model, vector, n, statuses=statuses)
            return [(str(i), s) for i, s in found]

        with read.snapshot("memory"):  # one read transaction for the statements below
            if p.lexical > 0:  # the vector search runs while the full-text statements do (ADR 0017)
                lexical, semantic = search.lexical_alongside(
                    search_vectors, being_id, text, n, statuses, actors=names
                )
            else:
                lexical, semantic = [], search_vectors()
            best = rank(
                p,
                read.ranking(being_id),
                semantic,
                lexical,
                text=text,
                k=k,
                statuses=statuses,
                now=self.e.clock.now(),
            )
            full = {r["id"]: r for r in read.nodes(being_id, ids=[UUID(i) for i, _ in best])}
        hits = [NodeView.of(full[i], s) for i, s in best if i in full]
        position = (
            self.reactivate(being_id, [full[h.id] for h in hits], ReactivationSource.QUERY)
            if reactivate
            else None
        )
        return Found(nodes=hits, position=position)

    # -- context -------------------------------------------------------------------------------

    def context(self, being_ref: str) -> ContextView:
        being_id = self.being(being_ref)
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


def render_context(
    system_prompt: dict[str, Any], snapshot: dict[str, Any], recent: list[dict[str, Any]]
) -> str:
    """The context as the being's model reads it: who it is, what is on its plate, what it recalls.
    (The spec's blocks 1-A, 1-B and 2-B, in that order, with headings for the reader, not the spec.)"""
    lines = ["# Who you are", system_prompt["soul"] or "(nobody has described you yet)"]
    if system_prompt["think_md"]:
        lines += ["", "## Notes from your last reflection", system_prompt["think_md"]]
    for title, key in (
        ("Rules you follow", "rules"),
        ("Your preferences", "preferences"),
        ("Your relationships", "relationships"),
    ):
        if system_prompt[key]:
            lines += ["", f"## {title}", *(f"- {t}" for t in system_prompt[key])]
    lines += ["", "# What is on your plate"]
    if snapshot["unread"]:
        lines += [
            "## Unread to-dos and reminders",
            *(f"- [{n['kind']}] {n['text']}" for n in snapshot["unread"]),
        ]
    if snapshot["knowledge"]:
        lines += ["## What you know", *(f"- {t}" for t in snapshot["knowledge"])]
    if snapshot["diary"]:
        lines += [
            f"## Your diary, the last {DIARY_DAYS} days",
            *(f"{d['date']}: {d['text']}" for d in snapshot["diary"]),
        ]
    lines += ["", "# Recent memories", *(f"- {n['text']}" for n in recent)]
    return "\n".join(lines)
