"""Erasure over HTTP (ADR 0073): `POST /v1/admin/beings/{being}/forget`, admin tokens only. Its own
router, included by `app.py` before `routes.v1`."""

from __future__ import annotations

from fastapi import APIRouter

from engram.adapters.http.deps import Admin, BeingPath, EngramDep
from engram.adapters.http.problems import ADMIN, COMMON, CONFLICT
from engram.services.erasure import Forgotten

erasure_routes = APIRouter(prefix="/v1/admin", tags=["admin"], responses={**COMMON, **ADMIN})


@erasure_routes.post(
    "/beings/{being}/forget", name="forget_being", response_model=Forgotten, responses={**CONFLICT}
)
def forget_being(being: BeingPath, engram: EngramDep, caller: Admin) -> Forgotten:
    """Erase a being for good: its key is destroyed, its views, vectors, full-text rows and journals
    purged, and an `Erased` receipt appended. Forgetting it again answers `already: true`."""
    by = f"token:{caller.token_id}" if caller.token_id else "admin"
    return engram.forgetting.forget_being(being, by=by)
