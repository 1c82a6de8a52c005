"""Erasure of one subject and of one item over HTTP (ADR 0075, 0076). Its own router, included by
`app.py` before `routes.v1`.

- `POST /v1/admin/beings/{being}/forget-subject?user=U`: admin tokens only, as forgetting a being.
- `POST /v1/beings/{being}/forget/{kind}/{item_id}`: a being's token may forget its own notes,
  messages and facts; another being's item answers 403.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Admin, Being, BeingPath, Caller, EngramDep
from engram.adapters.http.problems import ADMIN, COMMON, CONFLICT, ApiError
from engram.services.erasure import Forgotten
from engram.services.erasure_items import NotYours

erasure_item_routes = APIRouter(prefix="/v1", responses={**COMMON})


def _by(caller: Caller) -> str:
    return f"token:{caller.token_id}" if caller.token_id else ("admin" if caller.is_admin else "being")


@erasure_item_routes.post(
    "/admin/beings/{being}/forget-subject",
    name="forget_subject",
    tags=["admin"],
    response_model=Forgotten,
    responses={**ADMIN, **CONFLICT},
)
def forget_subject(
    being: BeingPath,
    engram: EngramDep,
    caller: Admin,
    user: Annotated[str, Query(min_length=1, max_length=200, description="The user to forget.")],
) -> Forgotten:
    """Erase everything of one user in a being: their messages and the being's answers to them, their
    sessions and summaries, the facts about them, and what was extracted or made from those. Their keys
    are destroyed and an `Erased` receipt appended (naming the user by their conversation's id)."""
    return engram.item_forgetting.forget_subject(being, user, by=_by(caller))


@erasure_item_routes.post(
    "/beings/{being}/forget/{kind}/{item_id}",
    name="forget_item",
    tags=["erasure"],
    response_model=Forgotten,
    responses={**CONFLICT, 403: {"description": "The item is another being's."}},
)
def forget_item(
    being: Being,
    kind: Literal["note", "message", "fact"],
    item_id: str,
    engram: EngramDep,
    caller: Caller,
) -> Forgotten:
    """Erase one note, message or fact of the being: its key is destroyed (and the keys of what was made
    from it), its views purged, an `Erased` receipt appended. Again: `already: true`. `item_id`: the
    item's id, or the caller's own id for a note (its idempotency key) or a message (its `id`)."""
    try:
        return engram.item_forgetting.forget_item(kind, item_id, by=_by(caller), being=being.id)
    except NotYours as exc:
        raise ApiError(403, "forbidden", str(exc)) from None
