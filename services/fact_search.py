"""Retrieving durable facts (issue #11, ADR 0059): three ranking profiles, the relevance gate,
entity cards, the foundation block and spec 001's prompt slice. `engram.fact_search`.

Every read is scoped to the owners a being reads (`FactReads.owners`: itself and its spaces) and
follows entity merges. Each hit carries its score broken down by part, as its profile computes it:

- `hybrid` (spec 001): `0.50·semantic + 0.28·lexical + 0.10·confidence + 0.07·recency +
  0.05·channel` for a fact with a vector, `0.75·lexical + 0.10·confidence + 0.10·recency +
  0.05·channel` without; then the relevance gate (`FactGate`), strict or not.
- `blended` (spec 004): the 50 nearest facts, reranked `0.4·similarity + 0.3·recency (14-day
  half-life) + 0.3·frequency of their entity keys among the candidates`.
- `trust` (spec 003): semantic relevance above a floor, then `source_trust ≥ min_trust`.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import numpy as np
from pydantic import BaseModel, Field

from engram.domain.errors import DomainError, InvalidInput
from engram.domain.fact import LORE_SUBJECT, Fact, FactStatus
from engram.domain.text import check_text
from engram.projections.fact_queries import FactReads
from engram.projections.fact_search import FactSearch
from engram.projections.note_search import terms
from engram.services.beings import resolve_being_id
from engram.services.embedding_roles import embed_queries
from engram.services.ports import Reads
from engram.services.thresholds import thresholds_for

Profile = Literal["hybrid", "blended", "trust"]
PROFILES: tuple[str, ...] = ("hybrid", "blended", "trust")
MAX_FACT_QUERY_CHARS = 4000  # as a message or memory query
MAX_FACT_HITS = 24  # spec 001: the limit is clamped to 1..24
DEFAULT_FACT_HITS = 8
BACKFILL = 8  # spec 001: a query embeds at most 8 facts still missing a vector
EMBED_BATCH = 500  # facts per command when embedding ahead (one embedder call each)
CANDIDATES = 50  # spec 004's top 50 by cosine
HYBRID_POOL = 3  # hybrid and trust: this many candidates per hit asked, by cosine and by shared words
MIN_HYBRID_POOL = 24
CARD_FACTS = 3
CARD_MIN_IMPORTANCE = 2
FOUNDATION = 20
DEFAULT_MIN_TRUST = 0.5  # spec 003's `min_source_trust`
LEXICAL_MIN = 0.24  # spec 001, without semantic
COMBINED_MIN = 0.62  # spec 001, without semantic
SEARCH_VIEWS = ("facts", "fact_search")
_COMPACT = re.compile(r"\W+")
_WORD = re.compile(r"\w+")


# -- the gate's semantic floors, per embedder (ADR 0006, ADR 0059) -------------------------------


@dataclass(frozen=True)
class FactGate:
    semantic: float
    """A fact at least this similar to the query passes the hybrid gate (the embedder's recall)."""
    signal: float
    """A strong combined score passes only with this much semantic or lexical signal."""
    trust_semantic: float
    """The trust profile's relevance floor: spec 003's 0.7 for the spec's embedder, scaled."""


def gate_for(model: str) -> FactGate:
    recall = thresholds_for(model).recall
    # Spec 003's 0.7 is twice the spec embedder's recall (0.35); other embedders keep that ratio,
    # capped below 0.9 (a paraphrase rarely scores higher on any of them).
    return FactGate(semantic=recall, signal=recall / 2, trust_semantic=min(2 * recall, 0.85))


# -- the parts of a score ----------------------------------------------------------------------


def _compact(text: str) -> str:
    return _COMPACT.sub("", text.casefold())


def lexical_score(query: str, text: str, evidence: str | None) -> float:
    """Spec 001's token overlap / substring match on fact + evidence: 1 when the query, compacted
    (case-folded, without spaces or punctuation, 3 characters or more), is inside the fact's, else
    the share of the query's words the fact or its evidence has."""
    words = _words(query)
    if not words:
        return 0.0
    doc = f"{text} {evidence or ''}"
    compact = _compact(query)
    if len(compact) >= 3 and compact in _compact(doc):
        return 1.0
    return len(words & _words(doc)) / len(words)


def _words(text: str) -> set[str]:
    """The words as the index holds them (`terms`), as a set: case-folded, two characters or more."""
    return {w for w in _WORD.findall(text.casefold()) if len(w) > 1}


def age_days(at: str, now: datetime) -> float:
    return max((now - datetime.fromisoformat(at)).total_seconds() / 86400.0, 0.0)


def recency_score(at: str, now: datetime) -> float:
    """Spec 001: `1 / (1 + ageDays / 45)`."""
    return 1.0 / (1.0 + age_days(at, now) / 45.0)


def half_life_recency(at: str, now: datetime, days: float = 14.0) -> float:
    """Spec 004: exponential decay with a 14-day half-life."""
    return float(0.5 ** (age_days(at, now) / days))


def channel_score(fact_channel: str | None, channel: str | None) -> float:
    """Spec 001: 1 same channel, 0.25 a fact of no channel, 0 another; no channel asked: 0.25 each."""
    if channel is None or fact_channel is None:
        return 0.25
    return 1.0 if fact_channel == channel else 0.0


def hybrid_parts(
    semantic: float | None, lexical: float, confidence: float, recency: float, channel: float
) -> dict[str, float]:
    """Each part's contribution (weight · value); their sum is the score."""
    if semantic is None:
        return {
            "lexical": 0.75 * lexical,
            "confidence": 0.10 * confidence,
            "recency": 0.10 * recency,
            "channel": 0.05 * channel,
        }
    return {
        "semantic": 0.50 * semantic,
        "lexical": 0.28 * lexical,
        "confidence": 0.10 * confidence,
        "recency": 0.07 * recency,
        "channel": 0.05 * channel,
    }


def passes_gate(semantic: float | None, lexical: float, combined: float, gate: FactGate) -> bool:
    """Spec 001's relevance gate."""
    if semantic is None:
        return lexical >= LEXICAL_MIN or combined >= COMBINED_MIN
    if semantic >= gate.semantic or lexical >= LEXICAL_MIN:
        return True
    return combined >= COMBINED_MIN and max(semantic, lexical) >= gate.signal


def resolve_ref(ref: str, aliases: dict[str, str]) -> str:
    """Where a ref leads after merges (a chain is followed; merges never make cycles)."""
    seen = {ref}
    while ref in aliases and aliases[ref] not in seen:
        ref = aliases[ref]
        seen.add(ref)
    return ref


# -- what a search returns ---------------------------------------------------------------------


class FactHit(BaseModel):
    id: str
    text: str
    subject: str
    type: str
    owner_id: str = Field(description="The being's id, or the space's the fact is shared in.")
    channel: str | None
    importance: int
    pinned: bool
    confidence: float
    source_trust: float
    entity_refs: list[str] = Field(description="As stated, merges followed.")
    entity_label: str | None = None
    updated_at: str
    score: float
    parts: dict[str, float] = Field(description="Each part's contribution; they sum to the score.")
    passed_gate: bool = True


class EntityCard(BaseModel):
    ref: str
    label: str | None
    facts: list[str]
    fact_ids: list[str]
    line: str = Field(description="`[person:john]: fact1; fact2; fact3`")


class FactsFound(BaseModel):
    query: str
    profile: str
    hits: list[FactHit]
    cards: list[EntityCard]
    foundation: list[str] = Field(description="Pinned facts (up to 20): the foundation block.")
    block: str = Field(description="The cards' lines first, then one line per hit.")


class PromptSlice(BaseModel):
    user: str
    channel: str | None
    query: str | None
    user_facts: list[FactHit]
    relevant_facts: list[FactHit]
    relevant_messages: list[dict[str, Any]]
    cards: list[EntityCard]
    foundation: list[str]
    text: str


class EntitySummary(BaseModel):
    ref: str
    label: str | None
    facts: int = Field(description="Facts whose subject is the entity.")
    mentions: int = Field(description="Facts carrying its ref.")
    aliases: list[str]


class EntityPage(BaseModel):
    ref: str
    asked: str
    merged_into: str | None = Field(description="Set when the ref asked is an alias merged into `ref`.")
    label: str | None
    aliases: list[str]
    facts: list[FactHit]
    mentions: list[FactHit]
    card: EntityCard | None


def check_fact_query(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the query is empty: give the words to search for", field="query")
    check_text("query", text)
    if len(text) > MAX_FACT_QUERY_CHARS:
        raise InvalidInput(
            f"the query has at most {MAX_FACT_QUERY_CHARS} characters, got {len(text)}", field="query"
        )
    return text


def _label(field: str, value: str | None) -> str | None:
    if value is not None:
        if not 0 < len(value) <= 200:
            raise InvalidInput(f"{field} has 1 to 200 characters", field=field)
        check_text(field, value)
    return value


def _refs(row: dict[str, Any]) -> list[str]:
    import json

    refs: list[str] = json.loads(row["entity_refs_json"] or "[]")
    return refs


class FactSearching:
    """`engram.fact_search`."""

    def __init__(self, engram: Reads, messages: Callable[[], Any]) -> None:
        self.e = engram
        self._messages = messages
        self._held = threading.local()  # this thread's read snapshot during a search

    @property
    def _facts(self) -> FactReads:
        read = getattr(self._held, "read", None)
        return FactReads(read) if read is not None else self.e.views.facts

    @property
    def _search(self) -> FactSearch:
        read = getattr(self._held, "read", None)
        return (
            FactSearch(read, self.e.views.fact_search_view) if read is not None else self.e.views.fact_search
        )

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction per view for the whole search: a search makes about ten reads, and
        on PostgreSQL each of its own would pay a transaction and the active tables' lookup."""
        read = self.e.views.read
        with read.snapshot("facts", "fact_search"):
            self._held.read = read
            try:
                yield
            finally:
                self._held.read = None

    # -- embedding ------------------------------------------------------------------------------

    def embed_facts(self, owners: Sequence[str], most: int) -> int:
        """Record `Fact.Embedded` for up to `most` active facts of the owners without a vector of
        their current text (a revised fact's vector is of its old text); how many."""
        self.e.views.ensure(names=SEARCH_VIEWS)
        todo = self.e.views.fact_search.unembedded(owners, most)
        done = 0
        by_owner: dict[str, list[str]] = {}
        for fact_id, owner in todo:
            by_owner.setdefault(owner, []).append(fact_id)
        for owner, ids in by_owner.items():
            done += self.e.runner.run(
                "embed_facts", functools.partial(self._embed, UUID(owner), ids), being_id=UUID(owner)
            )
        return done

    def embed_pending(self, *, stopping: Callable[[], bool] = lambda: False) -> int:
        """What the worker does: embed every active fact still without an up-to-date vector, so that
        a search finds them embedded instead of embedding them itself."""
        self.e.views.ensure(names=SEARCH_VIEWS)
        done = 0
        for owner in self.e.views.fact_search.owners_unembedded():
            while not stopping():
                n = self.embed_facts([owner], EMBED_BATCH)
                done += n
                if n == 0:
                    break
        return done

    def _embed(self, owner: UUID, ids: list[str]) -> int:
        facts = self.e.store.get_many(Fact, [UUID(i) for i in ids], being_id=owner)
        facts = [f for f in facts if f.active and f.embedded_text != f.text]
        if not facts:
            return 0
        # Spec 001 embeds the type, the fact and its evidence.
        vectors = self.e.embedder.embed(
            [f"{f.fact_type}: {f.text} {f.evidence or ''}".strip() for f in facts]
        )
        at = self.e.clock.now()
        kept = []
        for fact, vector in zip(facts, vectors, strict=True):
            try:
                fact.embed(vector, at)
            except DomainError:  # another model's vector already: left as it is
                continue
            kept.append(fact)
        if kept:
            self.e.store.save(*kept)
        return len(kept)

    # -- searching ------------------------------------------------------------------------------

    def search(
        self,
        being_ref: str,
        query: str,
        *,
        user: str | None = None,
        channel: str | None = None,
        limit: int = DEFAULT_FACT_HITS,
        profile: str = "hybrid",
        min_trust: float = DEFAULT_MIN_TRUST,
        strict: bool = False,
        types: Sequence[str] | None = None,
        vector: np.ndarray[Any, Any] | None = None,
    ) -> FactsFound:
        """The being's facts (and its spaces') that answer `query`, ranked by `profile`. `limit` is
        clamped to 1..24. `vector` is the query's, when the caller has it (the benchmark)."""
        query = check_fact_query(query)
        if profile not in PROFILES:
            raise InvalidInput(f"profile: one of {', '.join(PROFILES)}", field="profile")
        if isinstance(min_trust, bool) or not 0.0 <= float(min_trust) <= 1.0 or math.isnan(min_trust):
            raise InvalidInput("min_trust is between 0 and 1", field="min_trust")
        _label("user", user)
        _label("channel", channel)
        limit = min(max(int(limit), 1), MAX_FACT_HITS)
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=SEARCH_VIEWS, being=being_id)
        # The query's vector first: embedding what still lacks one writes, which a snapshot taken
        # before would not see.
        owners: list[str] | None = None
        queried: tuple[str, np.ndarray[Any, Any]] | None = None
        if vector is None:
            owners = self.e.views.facts.owners(being_id)
            queried = self._query_vector(owners, query)
        else:
            queried = (self.e.embedder.model_id, vector)
        subjects = None if user is None else {user, LORE_SUBJECT}
        with self._snapshot():
            owners = owners or self._facts.owners(being_id)
            hits = self._ranked(
                owners, query, profile, channel, min_trust, strict, subjects, types, queried, limit
            )[:limit]
            aliases = self._facts.aliases(owners)
            for hit in hits:
                hit.entity_refs = list(dict.fromkeys(resolve_ref(r, aliases) for r in hit.entity_refs))
            cards = self.cards(owners, hits, aliases)
            foundation = self._search.foundation(owners, FOUNDATION)
        return FactsFound(
            query=query,
            profile=profile,
            hits=hits,
            cards=cards,
            foundation=foundation,
            block="\n".join([*(c.line for c in cards), *(f"- {h.text}" for h in hits)]),
        )

    def _query_vector(self, owners: Sequence[str], query: str) -> tuple[str, np.ndarray[Any, Any]] | None:
        if len(query.strip()) < 3:  # spec 001 embeds a query of 3 characters or more
            return None
        if self.embed_facts(owners, BACKFILL):
            self.e.views.ensure(names=SEARCH_VIEWS)
        [embedding] = embed_queries(self.e.embedder, [query])
        return embedding.model, np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)

    def _ranked(
        self,
        owners: Sequence[str],
        query: str,
        profile: str,
        channel: str | None,
        min_trust: float,
        strict: bool,
        subjects: set[str] | None,
        types: Sequence[str] | None,
        queried: tuple[str, np.ndarray[Any, Any]] | None,
        limit: int,
    ) -> list[FactHit]:
        search = self._search
        # Spec 004's blended ranks the top 50 by cosine; hybrid and trust need a few candidates per
        # hit asked (each side of hybrid's pool is as large).
        pool = CANDIDATES if profile == "blended" else max(HYBRID_POOL * limit, MIN_HYBRID_POOL)
        semantic: dict[str, float] = {}
        if queried is not None:
            semantic = dict(search.semantic(owners, queried[0], queried[1], pool))
        ids = list(semantic)
        if profile == "hybrid":
            ids += [
                i for i in search.lexical_candidates(owners, list(terms(query)), pool) if i not in semantic
            ]
        rows = self._facts.facts_by_ids(owners, ids)
        live = [
            r
            for r in rows.values()
            if r["status"] == FactStatus.ACTIVE.value
            and (subjects is None or r["subject"] in subjects)
            and (types is None or r["fact_type"] in types)
        ]
        now = self.e.clock.now()
        gate = gate_for(queried[0] if queried else "")
        if profile == "hybrid":
            return self._hybrid(live, query, semantic, channel, strict, gate, now, limit)
        if profile == "blended":
            return self._blended(live, semantic, owners, now, limit)
        return self._trust(live, semantic, min_trust, gate, limit)

    def _hit(self, row: dict[str, Any], parts: dict[str, float], passed: bool = True) -> FactHit:
        return FactHit(
            id=str(row["id"]),
            text=row["text"],
            subject=row["subject"],
            type=row["fact_type"],
            owner_id=str(row["owner_id"]),
            channel=row["channel"],
            importance=int(row["importance"]),
            pinned=bool(row["pinned"]),
            confidence=float(row["confidence"]),
            source_trust=float(row["source_trust"]),
            entity_refs=_refs(row),
            entity_label=row["entity_label"],
            updated_at=row["updated_at"],
            score=round(sum(parts.values()), 6),
            parts={k: round(v, 6) for k, v in parts.items()},
            passed_gate=passed,
        )

    @staticmethod
    def _order(hits: list[FactHit]) -> list[FactHit]:
        # Best score, then the newest, then by id: stable sorts from the last key to the first (a
        # key that inverts the instant's text costs more than the whole search at 100k facts).
        out = sorted(hits, key=lambda h: h.id)
        out.sort(key=lambda h: h.updated_at, reverse=True)
        out.sort(key=lambda h: -h.score)
        return out

    def _hybrid(
        self,
        rows: list[dict[str, Any]],
        query: str,
        semantic: dict[str, float],
        channel: str | None,
        strict: bool,
        gate: FactGate,
        now: datetime,
        limit: int,
    ) -> list[FactHit]:
        scored: list[Scored] = []
        for r in rows:
            sem = semantic.get(str(r["id"]))
            lex = lexical_score(query, r["text"], r["evidence"])
            parts = hybrid_parts(
                sem,
                lex,
                float(r["confidence"]),
                recency_score(r["updated_at"], now),
                channel_score(r["channel"], channel),
            )
            scored.append(Scored(r, parts, passes_gate(sem, lex, sum(parts.values()), gate)))
        passed = [h for h in scored if h.passed]
        # Spec 001: what passes the gate; when nothing does, the ranked candidates, or none if strict.
        return self._top(passed if passed or strict else scored, limit)

    def _blended(
        self,
        rows: list[dict[str, Any]],
        semantic: dict[str, float],
        owners: Sequence[str],
        now: datetime,
        limit: int,
    ) -> list[FactHit]:
        aliases = self._facts.aliases(owners)
        keys = {str(r["id"]): {resolve_ref(ref, aliases) for ref in _refs(r)} for r in rows}
        counted = Counter(k for ks in keys.values() for k in ks)
        n = max(len(rows), 1)
        scored = []
        for r in rows:
            fact_id = str(r["id"])
            freq = max((counted[k] for k in keys[fact_id]), default=0) / n
            parts = {
                "similarity": 0.4 * semantic.get(fact_id, 0.0),
                "recency": 0.3 * half_life_recency(r["updated_at"], now),
                "frequency": 0.3 * freq,
            }
            scored.append(Scored(r, parts))
        return self._top(scored, limit)

    def _trust(
        self,
        rows: list[dict[str, Any]],
        semantic: dict[str, float],
        min_trust: float,
        gate: FactGate,
        limit: int,
    ) -> list[FactHit]:
        scored = [
            Scored(r, {"semantic": semantic[str(r["id"])]})
            for r in rows
            if semantic.get(str(r["id"]), 0.0) > gate.trust_semantic and float(r["source_trust"]) >= min_trust
        ]
        return self._top(scored, limit)

    def _top(self, scored: list[Scored], limit: int) -> list[FactHit]:
        """The best `limit` in `_order`'s order, made into hits (only those: a hit is a model)."""
        out = sorted(scored, key=lambda h: str(h.row["id"]))
        out.sort(key=lambda h: h.row["updated_at"], reverse=True)
        out.sort(key=lambda h: -h.score)
        return [self._hit(h.row, h.parts, h.passed) for h in out[:limit]]

    # -- entity cards ---------------------------------------------------------------------------

    def cards(
        self, owners: Sequence[str], hits: Sequence[FactHit], aliases: dict[str, str]
    ) -> list[EntityCard]:
        """Spec 004's entity cards: per entity of the hits (merges followed), the other active facts
        carrying it with importance ≥ 2 or pinned — pinned, then importance, then newest; 3 each."""
        targets = list(dict.fromkeys(r for h in hits for r in h.entity_refs))
        if not targets:
            return []
        leads_to: dict[str, str] = {t: t for t in targets}
        for alias in aliases:
            end = resolve_ref(alias, aliases)
            if end in leads_to:
                leads_to[alias] = end
        rows = self._facts.card_candidates(owners, list(leads_to))
        shown = {h.id for h in hits}
        per: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in targets}
        labels: dict[str, str] = {}
        for hit in hits:
            for ref in hit.entity_refs:
                if hit.entity_label and ref in leads_to and leads_to[ref] not in labels:
                    labels[leads_to[ref]] = hit.entity_label
        for row in rows:
            target = leads_to[row["ref"]]
            if row["entity_label"] and target not in labels:
                labels[target] = row["entity_label"]
            if row["id"] not in shown:
                per[target][row["id"]] = row
        cards = []
        for target in targets:
            chosen = sorted(
                per[target].values(),
                key=lambda r: (
                    not r["pinned"],
                    -int(r["importance"]),
                    newest_first(r["updated_at"]),
                    r["id"],
                ),
            )[:CARD_FACTS]
            if not chosen:
                continue
            label = labels.get(target)
            texts = [r["text"] for r in chosen]
            cards.append(
                EntityCard(
                    ref=target,
                    label=label,
                    facts=texts,
                    fact_ids=[str(r["id"]) for r in chosen],
                    line=f"[{target}]: " + "; ".join(t.rstrip(".") for t in texts),
                )
            )
        return cards

    # -- the prompt slice -----------------------------------------------------------------------

    def slice(
        self, being_ref: str, user: str, *, channel: str | None = None, query: str | None = None
    ) -> PromptSlice:
        """Spec 001's prompt slice: the user's facts (8), the facts of the user and the lore that
        answer the query (10), the channel's messages that answer it (8). Without a query: the user's
        latest facts and the latest lore lines, no messages."""
        if not isinstance(user, str) or not user.strip():
            raise InvalidInput("user is required: whose conversation the slice is for", field="user")
        _label("user", user)
        _label("channel", channel)
        if query is not None:
            query = check_fact_query(query)
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=SEARCH_VIEWS, being=being_id)
        reads = self.e.views.facts
        owners = reads.owners(being_id)
        now = self.e.clock.now()
        messages: list[dict[str, Any]] = []
        if query is None:
            user_facts = [self._latest(r, now) for r in reads.facts(owners, subject=user, limit=8)]
            relevant = [self._latest(r, now) for r in reads.facts(owners, subject=LORE_SUBJECT, limit=10)]
        else:
            user_facts = self.search(being_ref, query, user=user, channel=channel, limit=8).hits
            user_facts = [h for h in user_facts if h.subject == user]
            relevant = self.search(being_ref, query, user=user, channel=channel, limit=10).hits
            mine = {h.id for h in user_facts}
            relevant = [h for h in relevant if h.id not in mine]  # each fact once in the slice
            found = self._messages().search(being_ref, query, channel=channel, limit=8)
            messages = [h.model_dump() for h in found.hits]
        aliases = reads.aliases(owners)
        cards = self.cards(owners, [*user_facts, *relevant], aliases)
        foundation = self.e.views.fact_search.foundation(owners, FOUNDATION)
        lines = [
            *(c.line for c in cards),
            *(["Foundation:"] + [f"- {t}" for t in foundation] if foundation else []),
            *(["About the user:"] + [f"- {h.text}" for h in user_facts] if user_facts else []),
            *(["Relevant facts:"] + [f"- {h.text}" for h in relevant] if relevant else []),
            *(
                ["Relevant messages:"] + [f"- {m['user']}: {m['snippet']}" for m in messages]
                if messages
                else []
            ),
        ]
        return PromptSlice(
            user=user,
            channel=channel,
            query=query,
            user_facts=user_facts,
            relevant_facts=relevant,
            relevant_messages=messages,
            cards=cards,
            foundation=foundation,
            text="\n".join(lines),
        )

    def _latest(self, row: dict[str, Any], now: datetime) -> FactHit:
        return self._hit(row, {"recency": recency_score(row["updated_at"], now)})

    # -- entities -------------------------------------------------------------------------------

    def _entity_rows(
        self, being_ref: str
    ) -> tuple[list[str], dict[str, str], list[dict[str, Any]], dict[str, dict[str, Any]]]:
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=("facts",), being=being_id)
        reads = self.e.views.facts
        owners = reads.owners(being_id)
        pairs = reads.refs_of(owners)
        rows = reads.facts_by_ids(owners, list({str(p["fact_id"]) for p in pairs}))
        return owners, reads.aliases(owners), pairs, rows

    def entities(self, being_ref: str) -> list[EntitySummary]:
        """Every entity of the being's facts (merges followed): its label, facts, mentions, aliases."""
        owners, aliases, pairs, rows = self._entity_rows(being_ref)
        mentions: dict[str, set[str]] = {}
        labels: dict[str, str] = {}
        for p in pairs:
            row = rows.get(str(p["fact_id"]))
            if row is None or row["status"] != FactStatus.ACTIVE.value:
                continue
            target = resolve_ref(p["ref"], aliases)
            mentions.setdefault(target, set()).add(str(row["id"]))
            if row["entity_label"] and target not in labels:
                labels[target] = row["entity_label"]
        subjects = Counter(
            resolve_ref(r["subject"], aliases) for r in self.e.views.facts.facts(owners, limit=100_000)
        )
        return [
            EntitySummary(
                ref=ref,
                label=labels.get(ref),
                facts=subjects.get(ref, 0),
                mentions=len(ids),
                aliases=sorted(a for a in aliases if resolve_ref(a, aliases) == ref),
            )
            for ref, ids in sorted(mentions.items())
        ]

    def entity(self, being_ref: str, ref: str) -> EntityPage:
        """One entity's page; an alias shows the card of the entity it was merged into, and says so."""
        from engram.domain.entities import check_entity_refs

        [asked] = check_entity_refs([ref])
        owners, aliases, pairs, rows = self._entity_rows(being_ref)
        target = resolve_ref(asked, aliases)
        names = {a for a in aliases if resolve_ref(a, aliases) == target} | {target}
        now = self.e.clock.now()
        carrying = {str(p["fact_id"]) for p in pairs if p["ref"] in names}
        mentions = [
            self._latest(rows[i], now) for i in carrying if rows[i]["status"] == FactStatus.ACTIVE.value
        ]
        facts = [
            self._latest(r, now)
            for r in self.e.views.facts.facts(owners, limit=100_000)
            if r["subject"] in names
        ]
        if not mentions and not facts:
            from engram.services.errors import NotFound

            raise NotFound(f"no entity {asked} in this being's facts")
        mentions = self._order(mentions)
        label = next((rows[i]["entity_label"] for i in carrying if rows[i]["entity_label"]), None)
        cards = self.cards(
            owners, [h.model_copy(update={"entity_refs": [target], "id": ""}) for h in mentions[:1]], aliases
        )
        return EntityPage(
            ref=target,
            asked=asked,
            merged_into=target if target != asked else None,
            label=label,
            aliases=sorted(names - {target}),
            facts=facts,
            mentions=mentions,
            card=cards[0] if cards else None,
        )


class Scored:
    """A candidate's score before it becomes a hit: only the best `limit` become `FactHit`s."""

    __slots__ = ("parts", "passed", "row", "score")

    def __init__(self, row: dict[str, Any], parts: dict[str, float], passed: bool = True) -> None:
        self.row = row
        self.parts = parts
        self.passed = passed
        self.score = round(sum(parts.values()), 6)


def newest_first(at: str) -> tuple[int, ...]:
    """A key that sorts `utc_text` instants newest first."""
    return tuple(-ord(c) for c in at)
