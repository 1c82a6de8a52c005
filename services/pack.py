"""The context pack (spec 002, ADR 0049): the notes an agent puts in its prompt.

Without a query: the being's most recent (by `at`) live notes — not superseded, not expired, enabled,
not sensitive, not scenes (scenes become memories, which `recall` and `context` bring). With a query:
the same notes ranked by the hybrid search Engram uses for nodes, lexical (the notes' full-text index)
and semantic (their vectors) fused by `services/ranking.py`'s reciprocal rank fusion. Notes gain
their vectors as `Note.Embedded` events: the pack embeds, once, the live notes that lack one before
it searches (`embed_notes`), so a rebuild of the views never calls an embedder.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import numpy as np
from pydantic import BaseModel, Field

from engram.domain.errors import DomainError, InvalidInput
from engram.domain.note import Note
from engram.projections.notes import utc_text
from engram.services.beings import resolve_being_id
from engram.services.embedding_roles import embed_queries
from engram.services.ports import Reads
from engram.services.ranking import fuse_reciprocal
from engram.services.reading import Reading

DEFAULT_PACK_LIMIT = 20
MAX_PACK_LIMIT = 200
PACK_VIEWS = ("notes", "beings")
SEARCH_VIEWS = ("notes", "beings", "note_search")
EMBED_BATCH = 256
CANDIDATES_PER_NOTE = 3  # each channel brings 3× the notes a pack holds (at least MIN_CANDIDATES)
MIN_CANDIDATES = 50
HEADING = "## Memory Context"


class PackedNote(BaseModel):
    id: str
    kind: str
    text: str
    at: str = Field(description="When it happened (UTC).")
    tags: list[str]
    score: float | None = Field(None, description="The fused rank score, with a query; else null.")


class ContextPack(BaseModel):
    being: str
    query: str | None
    notes: list[PackedNote]
    text: str = Field(
        description="`## Memory Context`, then one `[kind] text` block per note, blank-line separated; "
        "empty when no note qualifies."
    )


def render_pack(notes: Sequence[PackedNote]) -> str:
    """Spec 002's rendering, exactly: the heading, then `[kind] text` blocks; nothing without notes."""
    if not notes:
        return ""
    return "\n\n".join([HEADING, *(f"[{n.kind}] {n.text}" for n in notes)])


def _packed(row: dict[str, Any], score: float | None = None) -> PackedNote:
    return PackedNote(
        id=str(row["id"]),
        kind=row["kind"],
        text=row["text"],
        at=row["at"],
        tags=json.loads(row["tags_json"] or "[]"),
        score=score,
    )


class Packing:
    def __init__(self, engram: Reads) -> None:
        self.e = engram

    def pack(self, being_ref: str, query: str | None = None, limit: int = DEFAULT_PACK_LIMIT) -> ContextPack:
        if isinstance(limit, bool) or not 1 <= limit <= MAX_PACK_LIMIT:
            raise InvalidInput(f"limit is between 1 and {MAX_PACK_LIMIT}", field="limit")
        if query is not None:
            query = Reading._check_text(query)
        being_id = resolve_being_id(self.e.store, being_ref)
        if query is None:
            self.e.views.ensure(names=PACK_VIEWS, being=being_id)
            rows = self.e.views.read.pack_notes(being_id, utc_text(self.e.clock.now()), limit)
            notes = [_packed(r) for r in rows]
        else:
            self.embed_notes(being_id)
            notes = self._search(being_id, query, limit)
        being = self.e.views.read.being(being_id)
        return ContextPack(
            being=being["name"] if being else being_ref, query=query, notes=notes, text=render_pack(notes)
        )

    def embed_notes(self, being_id: UUID) -> int:
        """Record `Note.Embedded` for the being's live notes that lack a vector (one embedder call per
        batch); how many. Notes taken meanwhile are embedded by the next call."""
        done = 0
        while True:
            self.e.views.ensure(names=SEARCH_VIEWS, being=being_id)
            now = utc_text(self.e.clock.now())
            ids = self.e.views.note_search.unembedded(being_id, now, EMBED_BATCH)
            if not ids:
                return done
            embedded = self.e.runner.run(
                "embed_notes", functools.partial(self._embed, being_id, ids), being_id=being_id
            )
            done += embedded
            if embedded == 0:
                return done

    def embed_pending(self, *, stopping: Callable[[], bool] = lambda: False) -> int:
        """`embed_notes` for every being with live notes that lack a vector: what the worker does
        every `ENGRAM_NOTE_EMBED_INTERVAL_S`, so that a `pack --query` finds the notes embedded
        already instead of embedding them itself. How many notes it embedded."""
        self.e.views.ensure(names=SEARCH_VIEWS)
        done = 0
        for being in self.e.views.note_search.beings_unembedded(utc_text(self.e.clock.now())):
            if stopping():
                break
            done += self.embed_notes(UUID(being))
        return done

    def _embed(self, being_id: UUID, ids: list[str]) -> int:
        notes = self.e.store.get_many(Note, [UUID(i) for i in ids], being_id=being_id)
        notes = [n for n in notes if n.embedding is None]
        if not notes:
            return 0
        vectors = self.e.embedder.embed([n.text for n in notes])
        at = self.e.clock.now()
        kept = []
        for note, vector in zip(notes, vectors, strict=True):
            try:
                note.embed(vector, at)
            except DomainError:  # another model's vector already: left as it is
                continue
            kept.append(note)
        if kept:
            self.e.store.save(*kept)
        return len(kept)

    def _search(self, being_id: UUID, query: str, limit: int) -> list[PackedNote]:
        search = self.e.views.note_search
        now = utc_text(self.e.clock.now())
        n = max(limit * CANDIDATES_PER_NOTE, MIN_CANDIDATES)
        [embedding] = embed_queries(self.e.embedder, [query])
        vector = np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)
        semantic = search.semantic(being_id, embedding.model, vector, now, n)
        lexical = search.lexical(being_id, query, now, n)
        fused = fuse_reciprocal([semantic, lexical])
        rows = self.e.views.read.notes_by_id(being_id, list(fused))
        # The notes view has the last word (a note superseded or disabled after the search view caught
        # up); ties go to the newer note.
        live = [
            (i, s)
            for i, s in fused.items()
            if i in rows
            and rows[i]["superseded_by"] is None
            and rows[i]["enabled"]
            and rows[i]["sensitivity"] != "sensitive"
            and (rows[i]["expires_at"] is None or rows[i]["expires_at"] > now)
        ]
        live.sort(key=lambda h: (-h[1], _negated(rows[h[0]]["at"]), h[0]))
        return [_packed(rows[i], s) for i, s in live[:limit]]


def _negated(at: str) -> tuple[int, ...]:
    """A key that sorts `utc_text` instants newest first."""
    return tuple(-ord(c) for c in at)
