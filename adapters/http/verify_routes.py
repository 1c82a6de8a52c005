"""`GET /v1/admin/verify` (ADR 0069): an admin checks the log's hash chain, as `engram verify` does,
and gets the head as a checkpoint to keep. Its own router, included by `app.py` before `routes.v1`.

A broken chain is a verdict, not an error of the request: 200 with `ok: false` and the first broken
position, so that a monitor reads it as it reads a healthy one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Admin, EngramDep
from engram.adapters.http.problems import ADMIN, COMMON

verify_routes = APIRouter(prefix="/v1/admin", tags=["admin"], responses={**COMMON, **ADMIN})


@verify_routes.get("/verify", name="verify_log")
def verify_log(
    engram: EngramDep,
    _caller: Admin,
    start: Annotated[int, Query(alias="from", ge=0, description="Check after this log position.")] = 0,
) -> dict[str, Any]:
    """Recompute the log's hash chain after position `from` and compare it with the stored hashes:
    `ok`, the events `checked`, the first `broken_at` position and why, and the head (`head_position`,
    `head_hash`: a checkpoint an outside party can check later)."""
    from engram.adapters.eventstore import chain_check

    return chain_check.verify(engram.store.app, start).as_dict(start)
