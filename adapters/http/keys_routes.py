"""`POST /v1/admin/keys/seal` (ADR 0095): an admin rewrites a log's old events (written in clear, or
under the being's key before item keys) into the form a new write gives them, as `engram keys seal`
does. Its own router, included by `app.py` before `routes.v1`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Admin, EngramDep
from engram.adapters.http.problems import ADMIN, COMMON
from engram.services.key_sealing import Sealed

keys_routes = APIRouter(prefix="/v1/admin", tags=["admin"], responses={**COMMON, **ADMIN})


@keys_routes.post("/keys/seal", name="seal_keys", response_model=Sealed)
def seal_keys(
    engram: EngramDep,
    caller: Admin,
    being: Annotated[str | None, Query(description="A being's name or id; every being without it.")] = None,
    dry_run: Annotated[bool, Query(description="Count what would be sealed; write nothing.")] = False,
) -> Sealed:
    """Rewrite the stored events of a being (every being without `being`) that are in clear or
    sealed under the being's key where an item or subject key is chosen now, so that `forget` can
    erase them; the hash chain is computed again from the first rewritten position and a receipt
    appended. A second run answers `nothing_to_seal: true`."""
    by = f"token:{caller.token_id}" if caller.token_id else "admin"
    return engram.key_sealing.seal(being, by=by, dry_run=dry_run)
