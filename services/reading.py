"""The agent's memory tools (spec 000, "Recall Flow" and "Context Structure"), each call scoped to one being.

`recall`, `recall_memory`, `search_memory`, `query` and `context`. They validate what the caller
gives, search (the vector index; the full-text index, `projections/fulltext/`), leave the scoring to
`services/ranking.py`, and record the reactivations. Reads that reach nodes reactivate them (spec
❺'s table): `recall` +1, `recall_memory` and `search_memory` +1 for live nodes and +2 for dead ones;
`query` +1 unless `reactivate=False` (auditors, benchmarks). What a read returns shows each node as
its reactivation left it (the count after the increment). Every read first makes sure the views
include the latest writes.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

import numpy as np
from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.note import NoteKind, Sensitivity
from engram.domain.scene import Scene
from engram.domain.text import check_text
from engram.projections.notes import utc_text
from engram.services.beings import resolve_being_id
from engram.services.embedding_roles import embed_queries
from engram.services.errors import NotFound
from engram.services.link_expansion import LinkHop, follow_links
from engram.services.ports import Reads
from engram.services.query_text import strip_words
from engram.services.ranking import profile, rank
from engram.services.score_parts import parts as score_parts
from engram.services.sessions import ConversationContext, conversation_context
from engram.services.thresholds import thresholds_for

RECALL_LIMIT = 3
MEMORY_VIEWS = ("memory", "vectors")  # what recall and query read
MAX_QUERY_K = 100
MAX_QUERY_CHARS = 4000
MAX_SEARCH_TERMS = 20
MAX_SEARCH_PAGE = MAX_QUERY_K
MAX_CURSOR_CHARS = 200
RECENT_NODES = 5
DIARY_DAYS = 7

# Block 1-A's note sections, in order: (key in `system_prompt`, note kind, heading, how many at most).
# Spec 002's agent context leads (soul notes, rules, recent summaries; newest first, by `at`); the
# reflection's notes follow them, then spec 000's sections (all, in the order they were noted).
LEADING_NOTES = (
    ("soul_notes", NoteKind.SOUL, "What you stand for", 5),
    ("rules", NoteKind.RULE, "Rules you follow", 10),
    ("summaries", NoteKind.SUMMARY, "What you did lately", 5),
)
SYSTEM_PROMPT_NOTES = (
    ("preferences", NoteKind.PREFERENCE, "Your preferences", None),
    ("relationships", NoteKind.RELATIONSHIP, "Your relationships", None),
    ("tools", NoteKind.TOOL, "Tools you can use", None),
    ("map", NoteKind.MAP, "Your map", None),
)
CONTEXT_NOTE_KINDS = [k.value for k in NoteKind if k != NoteKind.SCENE]
SNAPSHOT_ACKNOWLEDGED = "Thank you. I have read my notes, what I know and my diary, and I keep them in mind."


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
    sensitive: bool = False
    expires_at: str | None = None
    via: LinkHop | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="Present when the memory came in by following a link from an earlier hit (ADR 0063).",
    )

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
            sensitive=bool(row.get("sensitive") or False),
            expires_at=row.get("expires_at"),
        )


class Recalled(BaseModel):
    text: str = Field(description="The fragment stream wrapped in <memory>…</memory>, or empty.")
    nodes: list[NodeView]
    position: int | None = None


class Found(BaseModel):
    nodes: list[NodeView]
    position: int | None = None


class Explained(Found):
    """`query`'s hits with each hit's score broken down by its parts (`score_parts`), by node id; a
    hit that came in by following a link has none."""

    parts: dict[str, dict[str, float]] = Field(default_factory=dict)


class Searched(Found):
    """One page of a keyword search (`search_memory`)."""

    total: int = Field(description="How many memories match, on every page.")
    reactivated: int = Field(
        description="How many memories this call reactivated: every match on the first page, none after."
    )
    cursor: str | None = Field(
        None, description="Give it back (with the same terms and mode) for the next page; null on the last."
    )


class PrefixMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class ContextView(BaseModel):
    being: str
    system_prompt: dict[str, Any] = Field(
        description="Block 1-A: soul; the newest soul notes (5), rules (10) and summaries (5); think_md; "
        "and the enabled preferences, relationships, tools and map entries. Superseded, expired and "
        "sensitive notes never appear."
    )
    snapshot: dict[str, Any] = Field(description="Block 1-B: unread to-dos and reminders, knowledge, diary.")
    recent_nodes: list[dict[str, Any]] = Field(
        description="Block 2-B: the 5 most recently activated memories."
    )
    system_text: str = Field(description="Block 1-A rendered: the system prompt.")
    messages: list[PrefixMessage] = Field(
        description="Block 1-B as the user + assistant message pair to put at the start of a conversation: "
        "the snapshot rendered, and the being acknowledging it."
    )
    recent_text: str = Field(description="Block 2-B rendered: to inject with each turn.")
    text: str = Field(description="The three blocks rendered in one text, in order (then the conversation).")
    conversation: ConversationContext | None = Field(
        None,
        description="With a `user`: the latest session summary, the open session's rolling summary and "
        "the summary spine of the conversation with them (rendered at the end of `text`).",
    )


@dataclass(frozen=True)
class Reactivation:
    """What one reactivation command wrote: its log position, and each node's changed fields as the
    views will hold them (so a read can return the nodes as it left them)."""

    position: int | None
    after: dict[str, dict[str, Any]] = field(default_factory=dict)

    def applied(self, node: NodeView) -> NodeView:
        changed = self.after.get(node.id)
        return node.model_copy(update=changed) if changed else node


def fragments(nodes: Sequence[NodeView], rng: random.Random) -> str:
    """The spec's fragment mode: all actions and feelings, shuffled together (Fisher–Yates), ` / `-joined."""
    parts = [p for n in nodes for p in (n.action, n.feeling) if p]
    for i in range(len(parts) - 1, 0, -1):
        j = rng.randint(0, i)
        parts[i], parts[j] = parts[j], parts[i]
    return f"<memory>{' / '.join(parts)}</memory>" if parts else ""


@dataclass(frozen=True)
class _SearchKey:
    """A keyword search's terms and mode, and the cursors of its pages: the `seq` of the last node
    a page returned (nodes come newest first by `seq`, which no read changes), tagged with the
    search it belongs to so that a cursor is never applied to another search."""

    words: Sequence[str]
    mode: str

    @property
    def tag(self) -> str:
        spelled = json.dumps([self.mode, list(self.words)], ensure_ascii=False)
        return hashlib.sha256(spelled.encode("utf-8")).hexdigest()[:16]

    def cursor(self, seq: int) -> str:
        return base64.urlsafe_b64encode(f"{seq}:{self.tag}".encode()).decode().rstrip("=")

    def read_cursor(self, cursor: str) -> int:
        """The `seq` a page ended at; `InvalidInput` for a cursor of another search or none at all."""
        try:
            if len(cursor) > MAX_CURSOR_CHARS:
                raise ValueError
            seq, tag = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":")
            after = int(seq)
        except ValueError:
            raise InvalidInput("the cursor is not one a search returned") from None
        if tag != self.tag:
            raise InvalidInput(
                "the cursor belongs to another search: give the same terms and mode, or no cursor"
            )
        return after


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

    def reactivate(self, being_id: UUID, ids: Sequence[str], source: ReactivationSource) -> Reactivation:
        """Reactivate the nodes `ids` as `source` did, all in one command (one transaction)."""
        if not ids:
            return Reactivation(None)

        def handle() -> Reactivation:
            being, nodes = self.e.store.get_being_and_many(MemoryNode, [UUID(i) for i in ids], being_id)
            at = self.e.clock.now()
            for node in nodes:
                node.reactivate(source, being.cycle, at)
            # A reactivation is a touch: its commit need not wait for the disk (ADR 0018).
            position = self.e.store.save(*nodes, durable=False)
            return Reactivation(
                position,
                {
                    str(n.id): {
                        "reactivation_count": n.reactivation_count,
                        "last_activated_at": n.last_activated_at.isoformat(),
                        "status": n.status,
                    }
                    for n in nodes
                },
            )

        with self._locks_lock:
            lock = self._reactivating.setdefault(being_id, threading.Lock())
        with lock:
            return self.e.runner.run(f"reactivate_{source.value}", handle, being_id=being_id)

    def hidden(self, being_id: UUID) -> set[str]:
        """The being's nodes every read leaves out now: sensitive ones, and those past their notes'
        expiry (ADR 0046; compared with the clock at read time, whether or not anything recorded it)."""
        return self.e.views.read.hidden_nodes(being_id, utc_text(self.e.clock.now()))

    def _vector(self, text: str) -> tuple[str, np.ndarray[Any, np.dtype[np.float32]]]:
        [embedding] = embed_queries(self.e.embedder, [text])
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

    def _follows_links(self, links: bool | None) -> bool:
        return self.e.settings.query_links if links is None else links

    def _follow_links(
        self, being_id: UUID, hits: list[NodeView], k: int, statuses: set[str], hidden: set[str]
    ) -> list[NodeView]:
        """One hop along the links dreaming found (ADR 0063)."""
        views = self.e.views
        views.ensure(names=["links"])
        return follow_links(
            hits,
            k,
            links_of=lambda seeds: views.links.links_of(being_id, seeds),
            nodes=lambda ids: views.read.nodes(being_id, ids=ids),
            statuses=statuses,
            hidden=hidden,
        )

    # -- the spec's tools ----------------------------------------------------------------------

    def recall(
        self,
        being_ref: str,
        text: str,
        *,
        vector: np.ndarray[Any, np.dtype[np.float32]] | None = None,
        links: bool | None = None,
    ) -> Recalled:
        """Vector search over active and dying nodes (threshold per embedder), at most 3, each reactivated +1.

        `vector`: the text's embedding by the configured embedder, when the caller already has it.
        `links` (default: the `query_links` setting): also the nodes linked to those hits, 2 each
        (ADR 0063).
        """
        text = self._check_text(text)
        being_id = self.being(being_ref, MEMORY_VIEWS)
        model = self.e.embedder.model_id
        if vector is None:
            model, vector = self._vector(text)
        threshold = thresholds_for(model).recall
        # Hidden nodes are excluded in the index's own filter: the top 3 are still 3 when some are hidden.
        hidden = self.hidden(being_id)
        hits = self.e.views.vectors.similar_nodes(
            being_id,
            model,
            vector,
            RECALL_LIMIT,
            statuses=["active", "dying"],
            threshold=threshold,
            exclude=[UUID(i) for i in hidden],
        )
        rows = {r["id"]: r for r in self.e.views.read.nodes(being_id, ids=[h for h, _ in hits])}
        nodes = [NodeView.of(rows[str(h)], score) for h, score in hits if str(h) in rows]
        if self._follows_links(links):
            nodes = self._follow_links(being_id, nodes, RECALL_LIMIT * 3, {"active", "dying"}, hidden)
        done = self.reactivate(being_id, [n.id for n in nodes], ReactivationSource.RECALL)
        nodes = [done.applied(n) for n in nodes]
        return Recalled(text=fragments(nodes, self.rng), nodes=nodes, position=done.position)

    def recall_memory(self, being_ref: str, cluster_id: UUID) -> Found:
        """A cluster's nodes, most recently activated first (before this read); active +1, dead +2."""
        being_id = self.being(being_ref)
        if self.e.views.read.cluster(being_id, cluster_id) is None:
            raise NotFound(f"cluster {cluster_id} not found")
        hidden = self.hidden(being_id)
        rows = [
            r
            for r in self.e.views.read.nodes(being_id, cluster_id=cluster_id, order="recent")
            if r["id"] not in hidden
        ]
        done = self.reactivate(being_id, [r["id"] for r in rows], ReactivationSource.RECALL_MEMORY)
        return Found(nodes=[done.applied(NodeView.of(r)) for r in rows], position=done.position)

    def search_memory(
        self,
        being_ref: str,
        terms: Sequence[str] | str,
        mode: str = "or",
        limit: int = 50,
        cursor: str | None = None,
    ) -> Searched:
        """Keyword search (spec's fields and semantics), newest memories first, a page at a time.

        Without `cursor`, the search reactivates every match (active +1, dead +2), however many, in
        one command, and returns the first `limit`; with the `cursor` a page returned, the next page
        of the same search, reactivating nothing more (ADR 0038).
        """
        if mode not in ("or", "and"):
            raise InvalidInput("mode is 'or' or 'and'")
        words = terms.split() if isinstance(terms, str) else [t for t in terms if t.strip()]
        if not words:
            raise InvalidInput("give at least one search term")
        if len(words) > MAX_SEARCH_TERMS:
            raise InvalidInput(f"at most {MAX_SEARCH_TERMS} search terms")
        for word in words:
            check_text("a search term", word)
        if not 1 <= limit <= MAX_SEARCH_PAGE:
            raise InvalidInput(f"limit is between 1 and {MAX_SEARCH_PAGE}")
        search = _SearchKey(words, mode)
        after = search.read_cursor(cursor) if cursor is not None else None
        being_id = self.being(being_ref)
        hidden = self.hidden(being_id)
        matches = [m for m in self.e.views.search.keywords(being_id, words, mode) if m[0] not in hidden]
        rest = matches if after is None else [m for m in matches if m[1] < after]
        page = rest[:limit]
        done = (
            self.reactivate(being_id, [i for i, _ in matches], ReactivationSource.SEARCH_MEMORY)
            if after is None
            else Reactivation(None)
        )
        rows = {r["id"]: r for r in self.e.views.read.nodes(being_id, ids=[UUID(i) for i, _ in page])}
        nodes = [done.applied(NodeView.of(rows[i])) for i, _ in page if i in rows]
        return Searched(
            nodes=nodes,
            position=done.position,
            total=len(matches),
            reactivated=len(matches) if after is None else 0,
            cursor=search.cursor(page[-1][1]) if len(rest) > limit else None,
        )

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
        links: bool | None = None,
        explain: bool = False,
    ) -> Found:
        """Ranked retrieval: semantic + lexical (full-text index) + dates + neighbours + importance +
        recency, by profile (ADR 0008). `links` (default: the `query_links` setting): the nodes
        linked to the top 3 hits, 2 each, come in after their hit (ADR 0063). `explain`: an
        `Explained`, each hit's score broken down by its parts."""
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
            found = self.e.views.vectors.similar_nodes(
                being_id, model, vector, n, statuses=statuses, exclude=excluded
            )
            return [(str(i), s) for i, s in found]

        with read.snapshot("memory"):  # one read transaction for the statements below
            hidden = read.hidden_nodes(being_id, utc_text(self.e.clock.now()))
            excluded = [UUID(i) for i in hidden]
            if p.lexical > 0:  # the vector search runs while the full-text statements do (ADR 0017)
                lexical, semantic = search.lexical_alongside(
                    search_vectors, being_id, text, n, statuses, actors=names
                )
            else:
                lexical, semantic = [], search_vectors()
            lexical = [hit for hit in lexical if hit[0] not in hidden]
            ranking, now = read.ranking(being_id), self.e.clock.now()
            best = rank(
                p,
                ranking,
                semantic,
                lexical,
                text=text,
                k=k,
                statuses=statuses,
                now=now,
                exclude=hidden,
                actors=names,
            )
            explained = (
                score_parts(p, ranking, semantic, lexical, best, text=text, now=now, actors=names)
                if explain
                else {}
            )
            full = {r["id"]: r for r in read.nodes(being_id, ids=[UUID(i) for i, _ in best])}
        hits = [NodeView.of(full[i], s) for i, s in best if i in full]
        if self._follows_links(links):
            hits = self._follow_links(being_id, hits, k, set(statuses), hidden)
        if not reactivate:
            return Explained(nodes=hits, parts=explained) if explain else Found(nodes=hits)
        done = self.reactivate(being_id, [h.id for h in hits], ReactivationSource.QUERY)
        nodes = [done.applied(h) for h in hits]
        if explain:
            return Explained(nodes=nodes, position=done.position, parts=explained)
        return Found(nodes=nodes, position=done.position)

    # -- context -------------------------------------------------------------------------------

    def _conversation(self, being_id: UUID, being: str, user: str) -> ConversationContext:
        """What a context adds for `user`, with their latest session's compacted history (ADR 0067)."""
        from engram.services.dream_compaction import render_history, user_history

        history = user_history(self.e.store, self.e.views.conversations, being_id, user)
        compacted = history if history is not None and history.synthesis else None
        return conversation_context(
            self.e.views.conversations,
            being_id,
            user,
            compacted.as_dict() if compacted else None,
            render_history(compacted, being) if compacted else None,
        )

    def context(self, being_ref: str, user: str | None = None) -> ContextView:
        """The spec's three blocks: 1-A (system prompt), 1-B (snapshot, also as a prefix message
        pair) and 2-B (recent memories), as data and rendered; with `user`, where the conversation
        with them stands (ADR 0053)."""
        being_id = self.being(being_ref)
        if user is not None:
            check_text("user", user)
        read = self.e.views.read
        being = read.being(being_id)
        assert being is not None
        now = self.e.clock.now()
        # Superseded, expired and sensitive notes never enter a context (ADR 0046).
        notes = [
            n
            for n in read.notes(being_id, kinds=CONTEXT_NOTE_KINDS, active_at=utc_text(now))
            if n["sensitivity"] != Sensitivity.SENSITIVE
        ]
        today = now.date()
        since = (today - _dt.timedelta(days=DIARY_DAYS - 1)).isoformat()
        system_prompt: dict[str, Any] = {"soul": being["soul"]}
        newest_first = sorted(notes, key=lambda n: (n["at"], n["position"]), reverse=True)
        for key, kind, _, most in LEADING_NOTES:
            system_prompt[key] = [n["text"] for n in newest_first if n["kind"] == kind and n["enabled"]][
                :most
            ]
        system_prompt["think_md"] = being["think_md"]
        for key, kind, _, _ in SYSTEM_PROMPT_NOTES:
            system_prompt[key] = [n["text"] for n in notes if n["kind"] == kind and n["enabled"]]
        snapshot = {
            "unread": [
                {"kind": n["kind"], "text": n["text"], "id": n["id"]}
                for n in notes
                if n["kind"] in ("todo", "reminder") and not n["read"]
            ],
            "knowledge": [n["text"] for n in notes if n["kind"] == "knowledge" and n["enabled"]],
            "diary": [{"date": d["date"], "text": d["text"]} for d in read.diary(being_id, since)],
        }
        hidden = self.hidden(being_id)
        recent = [
            r
            for r in read.nodes(
                being_id,
                statuses=["active", "dying"],
                order="recent",
                limit=RECENT_NODES * 4 + len(hidden),  # enough left when hidden nodes are among them
            )
            if (r["action"] or "").strip() and r["id"] not in hidden
        ][:RECENT_NODES]
        recent_nodes = [
            {
                "id": r["id"],
                "text": Scene.model_validate(r["scene"]).to_text(r["feeling"] or ""),
                "source_ref": r["source_ref"],
            }
            for r in recent
        ]
        conversation = self._conversation(being_id, str(being["name"]), user) if user else None
        system_text = render_system_prompt(system_prompt)
        snapshot_text = render_snapshot(snapshot)
        recent_text = render_recent(recent_nodes)
        return ContextView(
            being=being["name"],
            system_prompt=system_prompt,
            snapshot=snapshot,
            recent_nodes=recent_nodes,
            system_text=system_text,
            messages=[
                PrefixMessage(role="user", content=snapshot_text),
                PrefixMessage(role="assistant", content=SNAPSHOT_ACKNOWLEDGED),
            ],
            recent_text=recent_text,
            text="\n\n".join(
                (system_text, snapshot_text, recent_text, *([conversation.text] if conversation else []))
            ),
            conversation=conversation,
        )


# The context as the being's model reads it: who it is, what is on its plate, what it recalls (the
# spec's blocks 1-A, 1-B and 2-B), with headings for the reader, not the spec.


def render_system_prompt(system_prompt: dict[str, Any]) -> str:
    lines = ["# Who you are", system_prompt["soul"] or "(nobody has described you yet)"]

    def sections(table: tuple[tuple[str, NoteKind, str, int | None], ...]) -> None:
        for key, _, title, _ in table:
            if system_prompt[key]:
                lines.extend(["", f"## {title}", *(f"- {t}" for t in system_prompt[key])])

    sections(LEADING_NOTES)
    if system_prompt["think_md"]:
        lines += ["", "## Notes from your last reflection", system_prompt["think_md"]]
    sections(SYSTEM_PROMPT_NOTES)
    return "\n".join(lines)


def render_snapshot(snapshot: dict[str, Any]) -> str:
    lines = ["# What is on your plate"]
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
    if len(lines) == 1:
        lines.append(
            f"Nothing: no unread to-do or reminder, no knowledge, no diary in the last {DIARY_DAYS} days."
        )
    return "\n".join(lines)


def render_recent(recent: list[dict[str, Any]]) -> str:
    return "\n".join(["# Recent memories", *(f"- {n['text']}" for n in recent)])
