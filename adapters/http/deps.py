"""Dependencies of the routes: the Engram, the caller, and the being a request may touch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.adapters.http.problems import ApiError
from engram.domain.errors import InvalidInput
from engram.services.beings import resolve_being
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound
from engram.services.tokens import Principal, TokenService

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token from `engram token create --being NAME` (one being) or `--admin` (everything).",
)


def engram_of(request: Request) -> Engram:
    engram: Engram = request.app.state.engram
    return engram


def tokens_of(request: Request) -> TokenService:
    tokens: TokenService = request.app.state.tokens
    return tokens


def principal(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)] = None,
) -> Principal:
    """The caller, verified by the `Authenticate` middleware before routing."""
    found = getattr(request.state, "principal", None)
    if not isinstance(found, Principal):
        raise ApiError(401, "unauthenticated", "this endpoint needs a bearer token")
    return found


def admin(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    if not caller.is_admin:
        raise ApiError(403, "forbidden", "this endpoint needs an admin token")
    return caller


@dataclass(frozen=True)
class BeingAccess:
    """A being the caller may touch. `ref` (its id) is what is passed on to the services."""

    id: UUID
    name: str

    @property
    def ref(self) -> str:
        return str(self.id)


BeingPath = Annotated[
    str, Path(min_length=1, max_length=100, description="The being's name or id.", examples=["Aria"])
]


def being_access(
    request: Request, being: BeingPath, caller: Annotated[Principal, Depends(principal)]
) -> BeingAccess:
    """The being named in the path, if the caller may reach it.

    Another being's resources answer exactly like a being that does not exist: a being token
    learns nothing about other beings, not even that they exist.
    """
    found = resolve_being(engram_of(request).store, being)
    if caller.being_id is not None and found.id != caller.being_id:
        raise NotFound(f"being {being!r} not found")
    request.state.being_id = str(found.id)  # for the request's log line
    return BeingAccess(id=UUID(str(found.id)), name=found.name)


EngramDep = Annotated[Engram, Depends(engram_of)]
Tokens = Annotated[TokenService, Depends(tokens_of)]
Caller = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]
Being = Annotated[BeingAccess, Depends(being_access)]


def parse_as_of(value: str | None) -> tuple[int | None, datetime | None]:
    """`as_of` is a version number (`3`) or an ISO instant with a timezone (`2026-11-20T09:00:00Z`)."""
    if value is None:
        return None, None
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value), None
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"as_of takes a version number or an ISO instant such as 2026-11-20T09:00:00Z, not {value!r}"
        ) from None
    return None, instant
