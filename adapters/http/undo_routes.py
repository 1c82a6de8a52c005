"""`POST /v1/admin/undo/{decision}` (ADR 0072): an admin reverses one recorded decision, or with
`dry_run` sees the plan. Its own router, included by `app.py` before `routes.v1`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from engram.adapters.http.deps import Admin, EngramDep
from engram.adapters.http.problems import ADMIN, BAD_JSON, COMMON, CONFLICT

undo_routes = APIRouter(prefix="/v1/admin", tags=["admin"], responses={**COMMON, **ADMIN})


class UndoRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = Field(False, description="Return the plan; write nothing.")
    cascade: bool = Field(False, description="Undo the later decisions that depend on it first.")
    reason: str = Field("", max_length=1000, description="Why: recorded with the undo.")
    being: str | None = Field(None, description="Refuse (404) unless this being owns the decision.")


@undo_routes.post("/undo/{decision}", name="undo_decision", responses={**BAD_JSON, **CONFLICT})
def undo_decision(
    decision: str,
    engram: EngramDep,
    _caller: Admin,
    body: UndoRequest = Body(default_factory=UndoRequest),  # noqa: B008 - FastAPI's way to declare a body
) -> dict[str, Any]:
    """Reverse one decision (`ID@VERSION`: a patrol consolidation, a manual supersede, an alias merge, a cluster merge
    or split, ADR 0078): its plan, and whether it was applied. 409 when later decisions depend on it (without
    `cascade`) or it is already undone."""
    result = engram.undo.undo(
        decision, reason=body.reason, being=body.being, cascade=body.cascade, dry_run=body.dry_run
    )
    return result.as_dict()
