"""`GET /v1/beings/{being}/why/{kind}/{id}` (issue #13, ADR 0068): a memory's lineage, read-only.
Its own router, included by `app.py` before `routes.v1` (whose `/beings/{being}/{kind}/{item_id}`
would take it)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import COMMON

why_routes = APIRouter(prefix="/v1", tags=["audit"], responses={**COMMON})

WhyKind = Literal["node", "cluster", "note", "fact", "session", "message"]


@why_routes.get("/beings/{being}/why/{kind}/{item_id}", name="why")
def why(being: Being, engram: EngramDep, kind: WhyKind, item_id: str) -> dict[str, Any]:
    """The memory's lineage as a tree: its sources, the decisions that touched it (model, prompt
    version, verbatim answer, validation), merges, deaths, supersedes, each with its log position
    and time. Another being's ids answer 404, as unknown ones do."""
    return engram.why.why(being.ref, kind, item_id)
