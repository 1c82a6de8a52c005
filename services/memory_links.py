"""A-MEM links as sleep steps (spec 003 dreaming step 1, issue #12, ADR 0062), and their reads.

- `links` (dreaming): a bounded batch of the being's memories that have a vector and were never
  linked (the `links` view's `pending` rows: the cost follows new memories, not all of them); for
  each, the being's other alive nodes and active facts with cosine similarity ≥ the threshold, from
  the vectors already in the node and fact collections (no embedder, no LLM). Each memory's linking
  is one `MemoryLinks.Linked` at a deterministic id: a tick run again finds it and writes nothing.
- `link_cleanup` (dreaming): links whose end died, was archived or expired are removed
  (`MemoryLinks.Unlinked` with the reason), on the aggregate of the memory that recorded them.
- `LinkQueries`: `engram links`, `GET /v1/beings/{being}/links`, the MCP tool `links`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np
import structlog
from pydantic import BaseModel

from engram.domain.links import (
    MAX_LINKS_PER_MEMORY,
    SCORE_TOLERANCE,
    MemoryLinks,
    links_id_for,
)
from engram.projections.fact_search import facts_alias
from engram.projections.links import memory_vectors
from engram.projections.notes import utc_text
from engram.projections.vector_index import SearchFilter
from engram.projections.vectors import nodes_alias
from engram.services.beings import resolve_being_id
from engram.services.sleep import StepContext, StepResult
from engram.services.thresholds import thresholds_for

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram

log = structlog.get_logger("engram.sleep.links")

LINK_BATCH = 100
"""Memories linked per tick: two vector searches each."""
CLEANUP_BATCH = 100
"""Ended memories whose links one tick removes."""
MAX_LIST = 1000

_VIEWS = ["vectors", "fact_search", "links"]
_ALIVE_NODES = frozenset({"active", "dying"})
_ACTIVE = frozenset({"active"})


class LinksStep:
    """Dreaming step 1: link the being's new memories to the alike ones."""

    name = "links"
    phase = "dreaming"

    def __init__(self, engram: Engram, *, batch: int = LINK_BATCH, threshold: float | None = None) -> None:
        self.engram = engram
        self.batch = batch
        self.threshold = threshold
        """None: the memory's embedder's (`thresholds_for(model).link`, ADR 0062)."""

    def _threshold(self, model: str) -> float:
        return self.threshold if self.threshold is not None else thresholds_for(model).link

    def pending(self, being_id: UUID) -> int | None:
        views = self.engram.views
        views.ensure(names=["links"])
        return views.links.pending_count(being_id)

    def _similar(
        self, being_id: UUID, memory_id: str, model: str, vector: Any, limit: int, threshold: float
    ) -> list[tuple[str, str, float]]:
        """(id, kind, score) of the being's other memories at least `threshold` alike, nearest first."""
        index = self.engram.views.vector_index
        vec = np.frombuffer(vector, dtype="<f4").astype(np.float32)
        found: list[tuple[str, str, float]] = []
        for kind, alias, statuses in (
            ("node", nodes_alias(model), _ALIVE_NODES),
            ("fact", facts_alias(model), _ACTIVE),
        ):
            if index.resolve_alias(alias) is None:
                continue
            where = SearchFilter(statuses=statuses, exclude_ids=frozenset({UUID(memory_id)}))
            hits = index.search(
                alias,
                being_id,
                vec,
                limit,
                where=where,
                score_threshold=threshold - SCORE_TOLERANCE,
                with_payload=False,
            )
            found += [
                (str(h.id), kind, float(h.score))
                for h in hits
                if float(h.score) >= threshold - SCORE_TOLERANCE
            ]
        found.sort(key=lambda f: (-f[2], f[0]))
        return found[:limit]

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        views = self.engram.views
        views.ensure(names=_VIEWS)
        rows = views.links.pending(being_id, limit=self.batch)
        if not rows:
            return StepResult()
        vectors = memory_vectors(
            views.read,
            [str(r["id"]) for r in rows if r["kind"] == "node"],
            [str(r["id"]) for r in rows if r["kind"] == "fact"],
        )
        store = self.engram.store
        ids = [links_id_for(being_id, UUID(str(r["id"]))) for r in rows]
        done_before = store.find_many(MemoryLinks, ids)
        # Links already recorded from the other end (by an earlier memory), and this batch's own.
        known = {
            (str(r["memory_id"]), str(r["other_id"]))
            for r in views.links.links_of(being_id, [str(r["id"]) for r in rows])
        }
        made: list[MemoryLinks] = []
        links = 0
        for row, agg_id in zip(rows, ids, strict=True):
            if agg_id in done_before or ctx.stopping():
                continue
            memory_id = str(row["id"])
            found = vectors.get(memory_id)
            model = found[0] if found else ""
            threshold = self._threshold(model)
            similar = (
                self._similar(being_id, memory_id, found[0], found[1], MAX_LINKS_PER_MEMORY, threshold)
                if found is not None and found[2]
                else []
            )
            keep = [
                {"id": other, "kind": kind, "score": score}
                for other, kind, score in similar
                if (memory_id, other) not in known
            ]
            for link in keep:
                known.add((str(link["id"]), memory_id))
                known.add((memory_id, str(link["id"])))
            made.append(
                MemoryLinks.link(
                    being_id,
                    UUID(memory_id),
                    str(row["kind"]),
                    keep,
                    threshold=threshold,
                    model=model,
                    at=ctx.now,
                )
            )
            links += len(keep)
        if made:
            store.save(*made)
        more = len(rows) == self.batch
        return StepResult(done=len(made), remaining=more, details={"memories": len(made), "links": links})


class LinkCleanupStep:
    """Dreaming: remove the links whose end died, was archived or expired."""

    name = "link_cleanup"
    phase = "dreaming"

    def __init__(self, engram: Engram, *, batch: int = CLEANUP_BATCH) -> None:
        self.engram = engram
        self.batch = batch

    def pending(self, being_id: UUID) -> int | None:
        return None

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        views = self.engram.views
        views.ensure(names=["links"])
        reads = views.links
        ended = reads.ended(being_id, utc_text(ctx.now), limit=self.batch)
        if not ended:
            return StepResult()
        reasons = {str(r["id"]): str(r["gone"] or "expired") for r in ended}
        # Each link is on the aggregate of the memory that recorded it (`owner_id`).
        by_owner: dict[str, dict[str, list[str]]] = {}
        for link in reads.links_of(being_id, list(reasons)):
            end, other, owner = str(link["memory_id"]), str(link["other_id"]), str(link["owner_id"])
            other_end = other if owner == end else end
            by_owner.setdefault(owner, {}).setdefault(reasons[end], []).append(other_end)
        aggs = self.engram.store.find_many(MemoryLinks, [links_id_for(being_id, UUID(o)) for o in by_owner])
        changed: list[MemoryLinks] = []
        removed = 0
        for owner, per_reason in by_owner.items():
            agg = aggs.get(links_id_for(being_id, UUID(owner)))
            if agg is None:
                continue
            before = len(agg.links)
            for reason, others in sorted(per_reason.items()):
                agg.unlink(others, reason, ctx.now)
            if len(agg.links) != before:
                changed.append(agg)
                removed += before - len(agg.links)
        if changed:
            self.engram.store.save(*changed)
        return StepResult(
            done=removed,
            remaining=len(ended) == self.batch,
            details={"removed": removed, "ended": len(ended)},
        )


class Link(BaseModel):
    memory_id: str
    memory_kind: str
    other_id: str
    other_kind: str
    score: float
    at: str


class LinksReport(BaseModel):
    being_id: str
    memory_id: str | None
    links: list[Link]

    def text(self) -> str:
        if not self.links:
            return "no links"
        return "\n".join(
            f"{link.score:.3f}  {link.memory_kind} {link.memory_id}  —  {link.other_kind} {link.other_id}"
            for link in self.links
        )


class LinkQueries:
    """The links of a being, or of one of its memories (from either end), with their scores."""

    def __init__(self, engram: Engram) -> None:
        self.engram = engram

    def links(self, being_ref: str | UUID, *, memory_id: str | None = None, limit: int = 100) -> LinksReport:
        from engram.domain.errors import InvalidInput

        being_id = resolve_being_id(self.engram.store, being_ref)
        if not 1 <= limit <= MAX_LIST:
            raise InvalidInput(f"limit is between 1 and {MAX_LIST}", field="limit")
        if memory_id is not None:
            try:
                memory_id = str(UUID(memory_id))
            except ValueError:
                raise InvalidInput("node is a memory's id (a UUID)", field="node") from None
        views = self.engram.views
        views.ensure(names=["links"], being=being_id)
        rows = (
            views.links.links_of(being_id, [memory_id])[:limit]
            if memory_id is not None
            else views.links.all_links(being_id, limit=limit)
        )
        return LinksReport(
            being_id=str(being_id),
            memory_id=memory_id,
            links=[
                Link(
                    memory_id=str(r["memory_id"]),
                    memory_kind=str(r["memory_kind"]),
                    other_id=str(r["other_id"]),
                    other_kind=str(r["other_kind"]),
                    score=float(r["score"]),
                    at=str(r["at"]),
                )
                for r in rows
            ],
        )


def expand_by_links(
    links_of: Callable[[Sequence[str], int], list[Any]], hits: Sequence[str], *, top: int, per_hit: int
) -> list[tuple[str, str, float]]:
    """(linked memory, the hit it came from, score) for the first `top` hits, `per_hit` links
    each, leaving out memories already among the hits."""
    seeds = list(hits[:top])
    if not seeds:
        return []
    seen = set(hits)
    out: list[tuple[str, str, float]] = []
    for row in links_of(seeds, per_hit):
        other = str(row["other_id"])
        if other in seen:
            continue
        seen.add(other)
        out.append((other, str(row["memory_id"]), float(row["score"])))
    return out
