"""Entity profiles and reflections over HTTP (issue #12, ADR 0064, 0065). Their own router, included
by `app.py` before `routes.v1` (whose `/beings/{being}/{kind}/{item_id}` would take them); `{being}`
resolves through `being_access`, so a being token reaches its own being only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import COMMON
from engram.services.entity_profiles import Profile
from engram.services.reflection import ReflectionList

profile_routes = APIRouter(prefix="/v1", tags=["sleep"], responses={**COMMON})


@profile_routes.get("/beings/{being}/profiles", name="list_profiles", response_model=list[Profile])
def list_profiles(being: Being, engram: EngramDep) -> list[Profile]:
    """Every entity profile of the being (built while it dreams), by ref."""
    return engram.profiles.profiles(being.ref)


@profile_routes.get("/beings/{being}/profiles/{ref}", name="show_profile", response_model=Profile)
def show_profile(being: Being, engram: EngramDep, ref: str) -> Profile:
    """One entity's profile: attributes, recent observations, the relationship (an alias reads as the
    entity it was merged into)."""
    return engram.profiles.profile(being.ref, ref)


@profile_routes.get("/beings/{being}/reflections", name="list_reflections", response_model=ReflectionList)
def list_reflections(
    being: Being, engram: EngramDep, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> ReflectionList:
    """The being's reflections, the newest first, and the importance gathered towards the next."""
    return engram.reflections.list(being.ref, limit=limit)
