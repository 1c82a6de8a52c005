"""Retrieval that follows links (issue #12, ADR 0063): `query` and `recall` may add, after each of
their first hits, the memories dreaming linked to it (one hop, bounded: the top `TOP_HITS` hits,
`PER_HIT` links each), each marked with the hop (`NodeView.via`) that `--explain` shows.

Only linked nodes are added (the results are nodes); a linked memory already among the hits, hidden
(sensitive, expired) or not of the statuses asked is left out. The list keeps its length `k`: what
the hops add pushes the last hits out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel

if TYPE_CHECKING:
    from engram.services.reading import NodeView

TOP_HITS = 3
PER_HIT = 2


class LinkHop(BaseModel):
    """How a memory came into the results: linked to an earlier hit, with the link's cosine."""

    linked_from: str
    link_score: float


def follow_links(
    hits: Sequence[NodeView],
    k: int,
    *,
    links_of: Callable[[list[str]], list[Any]],
    nodes: Callable[[list[UUID]], list[dict[str, Any]]],
    statuses: Collection[str],
    hidden: Collection[str],
    top: int = TOP_HITS,
    per_hit: int = PER_HIT,
) -> list[NodeView]:
    from engram.services.reading import NodeView

    seeds = [h.id for h in hits[:top]]
    if not seeds:
        return list(hits)
    seen = {h.id for h in hits}
    picked: dict[str, list[tuple[str, float]]] = {}
    for row in links_of(seeds):  # the strongest first
        seed, other = str(row["memory_id"]), str(row["other_id"])
        if row["other_kind"] != "node" or other in seen or other in hidden:
            continue
        if len(picked.setdefault(seed, [])) >= per_hit:
            continue
        picked[seed].append((other, float(row["score"])))
        seen.add(other)
    wanted = [UUID(o) for found in picked.values() for o, _ in found]
    if not wanted:
        return list(hits)
    rows = {str(r["id"]): r for r in nodes(wanted) if r["status"] in statuses}
    out: list[NodeView] = []
    for hit in hits:
        out.append(hit)
        for other, score in picked.get(hit.id, []):
            if other in rows:
                base = hit.score if hit.score is not None else 1.0
                view = NodeView.of(rows[other], round(base * score, 6))
                out.append(view.model_copy(update={"via": LinkHop(linked_from=hit.id, link_score=score)}))
    return out[:k]
