"""The facts' search view (issue #11, ADR 0059): what `engram facts search` and the prompt slice rank.

- `fact_docs`: one row per fact: its owner, status, the text and evidence the lexical score reads,
  and its vector once `Fact.Embedded` recorded one (`embedded_text`: the text that vector is of; a
  revised fact whose text differs is `stale` until it is embedded again).
- `fact_terms`: postings (fact, term) over text and evidence, the candidates of a lexical query.
- A vector collection per embedding model, `engram_facts__<model>__g<generation>` behind the alias
  `engram_facts__<model>`, in the shared `VectorIndex`: one point per embedded fact, payload
  `being_id` (the fact's owner), `status` (`active` / `inactive`).

Everything comes from events (the vector from `Fact.Embedded`), so a rebuild never calls an embedder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np

from engram.domain.embedding_models import EmbeddingModels
from engram.domain.fact import Fact, FactStatus
from engram.projections.engine import Batch, Projection, handles
from engram.projections.model_switch import drop_other_models
from engram.projections.note_search import terms
from engram.projections.notes import utc_text
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import Index, TableSpec
from engram.projections.vector_index import SearchFilter, VectorPoint
from engram.projections.vectors import VectorsView, model_slug

FACT_DOCS = TableSpec(
    name="fact_docs",
    columns={
        "id": "id",
        "owner_id": "id",
        "status": "text",
        "text": "text",
        "evidence": "text",
        "model": "text",  # None until `Fact.Embedded`
        "vector": "blob",  # float32, little-endian
        "embedded_text": "text",
        "stale": "bool",  # no vector, or one of an older text
        "pinned": "bool",  # a pinned fact is active (it cannot be archived)
        "updated_at": "text",  # utc_text of its latest change
        "position": "int",
    },
    indexes=(
        Index("unembedded", ("owner_id",), where="stale"),
        Index("foundation", ("owner_id", "updated_at"), where="pinned"),
    ),
)

FACT_TERMS = TableSpec(
    name="fact_terms",
    columns={"id": "text", "fact_id": "id", "owner_id": "id", "term": "text"},
    indexes=(Index("term", ("owner_id", "term", "fact_id")),),
)

FACT_COLLECTIONS = TableSpec(name="fact_collections", columns={"id": "text", "model": "text", "dim": "int"})

_COLLECTION = re.compile(r"^engram_facts__([a-z0-9_]+)__g([0-9]+)$")
MAX_QUERY_TERMS = 64  # a query of 10,000 characters asks for its 64 most frequent words, not all


def facts_alias(model: str) -> str:
    return f"engram_facts__{model_slug(model)}"


def fact_terms(text: str, evidence: str | None) -> set[str]:
    return set(terms(f"{text}\n{evidence or ''}"))


class FactSearchView(Projection):
    name = "fact_search"
    schema_version = 1
    tables = (FACT_DOCS, FACT_TERMS, FACT_COLLECTIONS)

    def __init__(self, vectors: VectorsView) -> None:
        self._vectors = vectors  # shares the one vector index a process has

    @property
    def index(self) -> Any:
        return self._vectors.index

    def prefetch(self, batch: Batch, events: Any) -> None:
        batch.fact_docs.prefetch(
            batch.conn, [str(e.originator_id) for e in events if not isinstance(e, Fact.Stated)]
        )

    def _row(self, batch: Batch, e: Any) -> dict[str, Any] | None:
        return batch.fact_docs.get(batch.conn, str(e.originator_id))

    def _terms(self, batch: Batch, fact_id: str, owner: str, old: set[str], new: set[str]) -> None:
        for term in old - new:
            batch.fact_terms.delete(f"{fact_id}/{term}")
        for term in new - old:
            batch.fact_terms.put(
                {"id": f"{fact_id}/{term}", "fact_id": fact_id, "owner_id": owner, "term": term}
            )

    @handles(Fact.Stated)
    def _stated(self, batch: Batch, e: Fact.Stated) -> None:
        fact_id, owner = str(e.originator_id), str(e.being_id)
        batch.fact_docs.put(
            {
                "id": fact_id,
                "owner_id": owner,
                "status": FactStatus.ACTIVE.value,
                "text": e.text,
                "evidence": e.evidence,
                "model": None,
                "vector": None,
                "embedded_text": None,
                "stale": True,
                "pinned": e.pinned,
                "updated_at": utc_text(e.timestamp),
                "position": batch.position,
            },
            whole=True,
        )
        self._terms(batch, fact_id, owner, set(), fact_terms(e.text, e.evidence))

    @handles(Fact.Revised)
    def _revised(self, batch: Batch, e: Fact.Revised) -> None:
        row = self._row(batch, e)
        if row is None:
            return
        old = fact_terms(row["text"], row["evidence"])
        self._terms(batch, row["id"], row["owner_id"], old, fact_terms(e.text, e.evidence))
        row.update(
            text=e.text,
            evidence=e.evidence,
            status=FactStatus.ACTIVE.value,
            stale=row["embedded_text"] != e.text,
            updated_at=utc_text(e.timestamp),
            position=batch.position,
        )
        batch.fact_docs.put(row, whole=True)

    def _change(self, batch: Batch, e: Any, **changes: Any) -> None:
        row = self._row(batch, e)
        if row is not None:
            row.update(changes, updated_at=utc_text(e.timestamp), position=batch.position)
            batch.fact_docs.put(row, whole=True)

    @handles(Fact.Reinforced)
    def _reinforced(self, batch: Batch, e: Fact.Reinforced) -> None:
        self._change(batch, e, status=FactStatus.ACTIVE.value)

    @handles(Fact.Archived)
    def _archived(self, batch: Batch, e: Fact.Archived) -> None:
        self._change(batch, e, status=FactStatus.ARCHIVED.value)

    @handles(Fact.Pinned)
    def _pinned(self, batch: Batch, e: Fact.Pinned) -> None:
        self._change(batch, e, pinned=True)

    @handles(Fact.Unpinned)
    def _unpinned(self, batch: Batch, e: Fact.Unpinned) -> None:
        self._change(batch, e, pinned=False)

    @handles(Fact.Embedded, Fact.Reembedded)
    def _embedded(self, batch: Batch, e: Fact.Embedded) -> None:
        row = self._row(batch, e)
        if row is not None:
            row.update(
                model=e.embedding.model,
                vector=e.embedding.data,
                embedded_text=e.text,
                stale=e.text != row["text"],
                position=batch.position,
            )
            batch.fact_docs.put(row, whole=True)

    @handles(EmbeddingModels.Switched)
    def _switched(self, batch: Batch, e: EmbeddingModels.Switched) -> None:
        # Every vector is of `e.model` now (ADR 0071): the other models' collections go.
        drop_other_models(
            batch,
            batch.fact_collections,
            e.model,
            self.index,
            lambda r: f"{facts_alias(r['model'])}__g{batch.generation}",
        )

    # -- the vector collection ------------------------------------------------------------------

    def _collection(self, batch: Batch, model: str, dim: int) -> str:
        name = f"{facts_alias(model)}__g{batch.generation}"
        if batch.fact_collections.get(batch.conn, model) is None:
            self.index.ensure_collection(name, dim)
            batch.fact_collections.put({"id": model, "model": model, "dim": dim})
            if batch.active:
                self.index.set_alias(facts_alias(model), name)
        return name

    def before_commit(self, batch: Batch) -> None:
        """Every embedded fact this batch changed, written as a whole point (vector and status)."""
        points: dict[str, list[VectorPoint]] = {}
        for key in batch.fact_docs.dirty:
            row = batch.fact_docs.rows[key]
            if row is None or row["vector"] is None:
                continue
            name = self._collection(batch, row["model"], len(row["vector"]) // 4)
            vector = np.frombuffer(row["vector"], dtype="<f4").astype(np.float32)
            status = "active" if row["status"] == FactStatus.ACTIVE.value else "inactive"
            payload = {"being_id": row["owner_id"], "status": status, "position": batch.position}
            points.setdefault(name, []).append(VectorPoint(UUID(row["id"]), vector, payload))
        for name, batch_points in points.items():
            self.index.upsert(name, batch_points)

    def after_switch(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        for row in conn.query(f"SELECT model FROM {db.table('fact_collections', generation)}"):
            self.index.set_alias(facts_alias(row["model"]), f"{facts_alias(row['model'])}__g{generation}")

    def drop_generation_extras(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        try:
            rows = conn.query(f"SELECT model FROM {db.table('fact_collections', generation)}")
        except Exception:  # the generation never got as far as creating its tables
            return
        for row in rows:
            self.index.drop_collection(f"{facts_alias(row['model'])}__g{generation}")

    def drop_stray_extras(self, keep: int) -> list[str]:
        dropped = []
        for name in self.index.list_collections():
            found = _COLLECTION.match(name)
            if found is None or int(found.group(2)) == keep:
                continue
            if self.index.resolve_alias(f"engram_facts__{found.group(1)}") == name:
                continue
            self.index.drop_collection(name)
            dropped.append(name)
        return dropped


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class FactSearch:
    """Searches over the facts of a list of owners (a being and its spaces): lexical candidates,
    nearest vectors, and which facts lack an up-to-date vector."""

    def __init__(self, read: Any, view: FactSearchView) -> None:
        self.read = read
        self.view = view

    def lexical_candidates(self, owners: Sequence[str], words: Sequence[str], limit: int) -> list[str]:
        """Facts of the owners sharing a word with the query, the most shared words first: postings
        alone (a covering index); the caller keeps the active ones."""
        words = sorted(words)[:MAX_QUERY_TERMS]
        if not words or not owners:
            return []
        with self.read.reading("fact_search") as (conn, tables):
            rows = conn.query(
                f"SELECT fact_id, COUNT(*) AS n FROM {tables['fact_terms']} "
                f"WHERE owner_id IN ({_marks(owners)}) AND term IN ({_marks(words)}) "
                f"GROUP BY fact_id ORDER BY n DESC, fact_id LIMIT {int(limit)}",
                [*owners, *words],
            )
        return [str(r["fact_id"]) for r in rows]

    def semantic(
        self, owners: Sequence[str], model: str, vector: np.ndarray[Any, Any], limit: int
    ) -> list[tuple[str, float]]:
        """The active embedded facts of the owners nearest to `vector`, best first (cosine)."""
        index = self.view.index
        alias = facts_alias(model)
        if index.resolve_alias(alias) is None:
            return []
        where = SearchFilter(statuses=frozenset({"active"}))
        hits: list[tuple[str, float]] = []
        for owner in owners:
            found = index.search(alias, UUID(owner), vector, limit, where=where, with_payload=False)
            hits += [(str(h.id), float(h.score)) for h in found]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:limit]

    def unembedded(self, owners: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """(fact id, owner) of active facts without a vector of their current text, newest first."""
        if not owners:
            return []
        with self.read.reading("fact_search") as (conn, tables):
            rows = conn.query(
                f"SELECT id, owner_id FROM {tables['fact_docs']} WHERE owner_id IN ({_marks(owners)}) "
                f"AND stale = ? AND status = ? ORDER BY position DESC, id LIMIT {int(limit)}",
                [*owners, True, FactStatus.ACTIVE.value],
            )
        return [(str(r["id"]), str(r["owner_id"])) for r in rows]

    def foundation(self, owners: Sequence[str], limit: int) -> list[str]:
        """The texts of the owners' pinned facts, the latest changed first: spec 004's foundation.
        Each owner's newest `limit` through the `foundation` index, then merged."""
        found: list[tuple[str, str]] = []
        with self.read.reading("fact_search") as (conn, tables):
            for owner in owners:
                rows = conn.query(
                    f"SELECT text, updated_at FROM {tables['fact_docs']} WHERE owner_id = ? AND pinned "
                    f"ORDER BY updated_at DESC LIMIT {int(limit)}",  # `pinned` as the index's predicate
                    [owner],
                )
                found += [(str(r["updated_at"]), str(r["text"])) for r in rows]
        found.sort(reverse=True)
        return [text for _, text in found[:limit]]

    def collections(self) -> list[str]:
        """The fact collections of the active generation (what the vector maintenance optimizes)."""
        with self.read.reading("fact_search") as (conn, tables):
            models = [str(r["model"]) for r in conn.query(f"SELECT model FROM {tables['fact_collections']}")]
        names = [self.view.index.resolve_alias(facts_alias(m)) for m in models]
        return [n for n in names if n is not None]

    def owners_unembedded(self) -> list[str]:
        with self.read.reading("fact_search") as (conn, tables):
            rows = conn.query(
                f"SELECT DISTINCT owner_id FROM {tables['fact_docs']} WHERE stale = ? AND status = ? "
                "ORDER BY owner_id",
                [True, FactStatus.ACTIVE.value],
            )
        return [str(r["owner_id"]) for r in rows]
