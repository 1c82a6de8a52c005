"""`GET /v1/beings/{being}/links` (issue #12, ADR 0062): the A-MEM links between a being's
memories, with their scores. Its own router, included by `app.py` before `routes.v1` (whose
`/beings/{being}/{kind}/{item_id}` would take it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import COMMON
from engram.services.memory_links import MAX_LIST, LinksReport

link_routes = APIRouter(prefix="/v1", tags=["sleep"], responses={**COMMON})


@link_routes.get("/beings/{being}/links", name="list_links", response_model=LinksReport)
def list_links(
    being: Being,
    engram: EngramDep,
    node: Annotated[str | None, Query(description="Only the links of this memory (node or fact id).")] = None,
    limit: Annotated[int, Query(description=f"At most this many (1-{MAX_LIST}).")] = 100,
) -> LinksReport:
    """The being's links between alike memories (cosine ≥ 0.7), the strongest first; with `node`,
    that memory's links from either end."""
    return engram.links.links(being.ref, memory_id=node, limit=limit)
