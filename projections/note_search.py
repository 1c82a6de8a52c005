"""The notes' search view (ADR 0049): what the context pack's `--query` ranks notes with.

- `note_docs`: one row per note that may enter a pack (not a scene, not sensitive): its state
  (superseded, expired, enabled), its `at` and `expires_at`, and its vector once `Note.Embedded`
  recorded one.
- `note_terms`: a full-text index over those notes' text, as plain rows (note, term, count) that
  both backends query alike; scored BM25-style at read time (`NoteSearch.lexical`).
- A vector collection per embedding model, `engram_notes__<model>__g<generation>` behind the alias
  `engram_notes__<model>`, in the same `VectorIndex` as the nodes': one point per embedded note,
  payload `being_id`, `status` (`active` / `inactive`) and `position`.

Everything comes from events (the vector from `Note.Embedded`), so a rebuild never calls an embedder.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any
from uuid import UUID

import numpy as np

from engram.domain.embedding_models import EmbeddingModels
from engram.domain.note import Note, NoteKind, Sensitivity
from engram.projections.engine import Batch, Projection, handles
from engram.projections.model_switch import drop_other_models
from engram.projections.notes import utc_text
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import Index, TableSpec
from engram.projections.vector_index import SearchFilter, VectorPoint
from engram.projections.vectors import VectorsView, model_slug

NOTE_DOCS = TableSpec(
    name="note_docs",
    columns={
        "id": "id",
        "being_id": "id",
        "kind": "text",
        "at": "text",  # utc_text
        "expires_at": "text",  # utc_text; None: never
        "superseded": "bool",
        "expired": "bool",
        "enabled": "bool",
        "model": "text",  # None until `Note.Embedded`
        "vector": "blob",  # float32, little-endian
        "position": "int",
    },
    indexes=(
        Index("unembedded", ("being_id", "at"), where="model IS NULL"),
        Index("expiring", ("being_id", "expires_at"), where="expires_at IS NOT NULL"),
    ),
)

NOTE_TERMS = TableSpec(
    name="note_terms",
    columns={"id": "text", "note_id": "id", "being_id": "id", "term": "text", "count": "int"},
    # Covering: a query reads its words' postings from the index alone, not a table row per posting.
    indexes=(Index("term", ("being_id", "term", "note_id", "count")),),
)

NOTE_COLLECTIONS = TableSpec(name="note_collections", columns={"id": "text", "model": "text", "dim": "int"})

MAX_TERMS_PER_NOTE = 512
_WORD = re.compile(r"\w+")
_COLLECTION = re.compile(r"^engram_notes__([a-z0-9_]+)__g([0-9]+)$")
BM25_K1 = 1.2


def terms(text: str) -> Counter[str]:
    """The words of `text` as the index holds them: case-folded, two characters or more, with counts."""
    counted = Counter(w for w in _WORD.findall(text.casefold()) if len(w) > 1)
    return Counter(dict(counted.most_common(MAX_TERMS_PER_NOTE)))


def notes_alias(model: str) -> str:
    return f"engram_notes__{model_slug(model)}"


def _status(row: dict[str, Any]) -> str:
    live = row["enabled"] and not row["superseded"] and not row["expired"]
    return "active" if live else "inactive"


class NoteSearchView(Projection):
    name = "note_search"
    schema_version = 1
    tables = (NOTE_DOCS, NOTE_TERMS, NOTE_COLLECTIONS)

    def __init__(self, vectors: VectorsView) -> None:
        self._vectors = vectors  # the nodes' view opens the one index a process has; this view shares it

    @property
    def index(self) -> Any:
        return self._vectors.index

    def prefetch(self, batch: Batch, events: Any) -> None:
        batch.note_docs.prefetch(
            batch.conn, [str(e.originator_id) for e in events if not isinstance(e, Note.Noted)]
        )

    def _change(self, batch: Batch, e: Any, **changes: Any) -> None:
        row = batch.note_docs.get(batch.conn, str(e.originator_id))
        if row is None:  # a scene or a sensitive note: never in a pack
            return
        row.update(changes, position=batch.position)
        batch.note_docs.put(row, whole=True)

    @handles(Note.Noted)
    def _noted(self, batch: Batch, e: Note.Noted) -> None:
        if e.kind == NoteKind.SCENE or e.sensitivity == Sensitivity.SENSITIVE:
            return
        note_id = str(e.originator_id)
        batch.note_docs.put(
            {
                "id": note_id,
                "being_id": str(e.being_id),
                "kind": e.kind,
                "at": utc_text(e.at),
                "expires_at": utc_text(e.expires_at) if e.expires_at is not None else None,
                "superseded": False,
                "expired": False,
                "enabled": True,
                "model": None,
                "vector": None,
                "position": batch.position,
            },
            whole=True,
        )
        for term, count in terms(e.text).items():
            batch.note_terms.put(
                {
                    "id": f"{note_id}/{term}",
                    "note_id": note_id,
                    "being_id": str(e.being_id),
                    "term": term,
                    "count": count,
                }
            )

    @handles(Note.Embedded, Note.Reembedded)
    def _embedded(self, batch: Batch, e: Note.Embedded) -> None:
        self._change(batch, e, model=e.embedding.model, vector=e.embedding.data)

    @handles(Note.Superseded)
    def _superseded(self, batch: Batch, e: Note.Superseded) -> None:
        self._change(batch, e, superseded=True)

    @handles(Note.SupersedeUndone)
    def _supersede_undone(self, batch: Batch, e: Note.SupersedeUndone) -> None:
        self._change(batch, e, superseded=False)

    @handles(Note.Expired)
    def _expired(self, batch: Batch, e: Note.Expired) -> None:
        self._change(batch, e, expired=True)

    @handles(Note.Enabled)
    def _enabled(self, batch: Batch, e: Note.Enabled) -> None:
        self._change(batch, e, enabled=True)

    @handles(Note.Disabled)
    def _disabled(self, batch: Batch, e: Note.Disabled) -> None:
        self._change(batch, e, enabled=False)

    @handles(EmbeddingModels.Switched)
    def _switched(self, batch: Batch, e: EmbeddingModels.Switched) -> None:
        # Every vector is of `e.model` now (ADR 0071): the other models' collections go.
        drop_other_models(
            batch,
            batch.note_collections,
            e.model,
            self.index,
            lambda r: f"{notes_alias(r['model'])}__g{batch.generation}",
        )

    # -- the vector collection ------------------------------------------------------------------

    def _collection(self, batch: Batch, model: str, dim: int) -> str:
        name = f"{notes_alias(model)}__g{batch.generation}"
        if batch.note_collections.get(batch.conn, model) is None:
            self.index.ensure_collection(name, dim)
            batch.note_collections.put({"id": model, "model": model, "dim": dim})
            if batch.active:
                self.index.set_alias(notes_alias(model), name)
        return name

    def before_commit(self, batch: Batch) -> None:
        """Write every embedded note this batch changed as a whole point (its vector and its state):
        notes change rarely after they are embedded, so no payload patching is worth its code."""
        points: dict[str, list[VectorPoint]] = {}
        for key in batch.note_docs.dirty:
            row = batch.note_docs.rows[key]
            if row is None or row["vector"] is None:
                continue
            name = self._collection(batch, row["model"], len(row["vector"]) // 4)
            vector = np.frombuffer(row["vector"], dtype="<f4").astype(np.float32)
            payload = {"being_id": row["being_id"], "status": _status(row), "position": batch.position}
            points.setdefault(name, []).append(VectorPoint(UUID(row["id"]), vector, payload))
        for name, batch_points in points.items():
            self.index.upsert(name, batch_points)

    def after_switch(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        for row in conn.query(f"SELECT model FROM {db.table('note_collections', generation)}"):
            self.index.set_alias(notes_alias(row["model"]), f"{notes_alias(row['model'])}__g{generation}")

    def drop_generation_extras(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        try:
            rows = conn.query(f"SELECT model FROM {db.table('note_collections', generation)}")
        except Exception:  # the generation never got as far as creating its tables
            return
        for row in rows:
            self.index.drop_collection(f"{notes_alias(row['model'])}__g{generation}")

    def drop_stray_extras(self, keep: int) -> list[str]:
        dropped = []
        for name in self.index.list_collections():
            found = _COLLECTION.match(name)
            if found is None or int(found.group(2)) == keep:
                continue
            if self.index.resolve_alias(f"engram_notes__{found.group(1)}") == name:
                continue
            self.index.drop_collection(name)
            dropped.append(name)
        return dropped


class NoteSearch:
    """The pack's searches over one being's notes: lexical (`note_terms`), semantic (the collection),
    and which notes still lack a vector. `read` is a `ReadModels` (its `reading`)."""

    def __init__(self, read: Any, view: NoteSearchView) -> None:
        self.read = read
        self.view = view

    def _live(self, prefix: str = "") -> str:
        return (
            f"{prefix}superseded = ? AND {prefix}expired = ? AND {prefix}enabled = ? "
            f"AND ({prefix}expires_at IS NULL OR {prefix}expires_at > ?)"
        )

    def beings_unembedded(self, now: str) -> list[str]:
        """The beings that have live notes no `Note.Embedded` gave a vector yet (the partial index
        `unembedded` holds only those notes)."""
        with self.read.reading("note_search") as (conn, tables):
            rows = conn.query(
                f"SELECT DISTINCT being_id FROM {tables['note_docs']} WHERE model IS NULL AND {self._live()} "
                "ORDER BY being_id",
                [False, False, True, now],
            )
        return [str(r["being_id"]) for r in rows]

    def unembedded(self, being_id: UUID, now: str, limit: int) -> list[str]:
        """Live notes of the being that no `Note.Embedded` gave a vector yet, newest first."""
        with self.read.reading("note_search") as (conn, tables):
            rows = conn.query(
                f"SELECT id FROM {tables['note_docs']} WHERE being_id = ? AND model IS NULL "
                f"AND {self._live()} ORDER BY at DESC, id LIMIT {int(limit)}",
                [str(being_id), False, False, True, now],
            )
        return [str(r["id"]) for r in rows]

    def lexical(self, being_id: UUID, text: str, now: str, limit: int) -> list[tuple[str, float]]:
        """The live notes that share words with `text`, best first: Σ over the query's words of
        idf · count·(k1 + 1) / (count + k1), idf as BM25's over the being's notes."""
        words = sorted(terms(text))
        if not words:
            return []
        marks = ", ".join("?" for _ in words)
        with self.read.reading("note_search") as (conn, tables):
            docs, terms_table = tables["note_docs"], tables["note_terms"]
            [total] = conn.query(f"SELECT COUNT(*) AS n FROM {docs} WHERE being_id = ?", [str(being_id)])
            df = {
                str(r["term"]): int(r["n"])
                for r in conn.query(
                    f"SELECT term, COUNT(*) AS n FROM {terms_table} WHERE being_id = ? AND term IN ({marks}) "
                    "GROUP BY term",
                    [str(being_id), *words],
                )
            }
            # The postings alone (a covering index), scored here; liveness is checked for the best
            # only, a page at a time, instead of joining every posting to its note.
            rows = conn.query(
                f"SELECT note_id, term, count FROM {terms_table} WHERE being_id = ? AND term IN ({marks})",
                [str(being_id), *words],
            )
            n = int(total["n"])
            idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
            scores: dict[str, float] = {}
            for r in rows:
                count = int(r["count"])
                key = str(r["note_id"])
                scores[key] = scores.get(key, 0.0) + idf[str(r["term"])] * count * (BM25_K1 + 1) / (
                    count + BM25_K1
                )
            ranked = sorted(scores.items(), key=lambda s: (-s[1], s[0]))
            out: list[tuple[str, float]] = []
            page = max(2 * limit, 100)
            for start in range(0, len(ranked), page):
                part = ranked[start : start + page]
                ids = ", ".join("?" for _ in part)
                live = {
                    str(r["id"])
                    for r in conn.query(
                        f"SELECT id FROM {docs} WHERE id IN ({ids}) AND {self._live()}",
                        [*(i for i, _ in part), False, False, True, now],
                    )
                }
                out += [hit for hit in part if hit[0] in live]
                if len(out) >= limit:
                    break
        return out[:limit]

    def lapsed(self, being_id: UUID, now: str) -> list[UUID]:
        """The being's notes past their expiry that the index still holds as active (the sweep has not
        recorded `Note.Expired` yet): few, read through the `expiring` index."""
        with self.read.reading("note_search") as (conn, tables):
            rows = conn.query(
                f"SELECT id FROM {tables['note_docs']} WHERE being_id = ? AND expires_at IS NOT NULL "
                "AND expires_at <= ? AND expired = ?",
                [str(being_id), now, False],
            )
        return [UUID(str(r["id"])) for r in rows]

    def semantic(
        self, being_id: UUID, model: str, vector: np.ndarray[Any, Any], now: str, limit: int
    ) -> list[tuple[str, float]]:
        """The live embedded notes nearest to `vector`, best first; the index's filter leaves out the
        inactive and the lapsed, so `limit` is filled whenever enough notes are live."""
        index = self.view.index
        alias = notes_alias(model)
        if index.resolve_alias(alias) is None:
            return []
        where = SearchFilter(
            statuses=frozenset({"active"}), exclude_ids=frozenset(self.lapsed(being_id, now))
        )
        hits = index.search(alias, being_id, vector, limit, where=where, with_payload=False)
        return [(str(h.id), float(h.score)) for h in hits]
