"""The fact retrieval routes (issue #11, ADR 0059): searching facts, the prompt slice, entities. Their
own router, included by `app.py` before `routes.v1`; `{being}` resolves through `being_access`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import COMMON
from engram.services.fact_search import (
    DEFAULT_FACT_HITS,
    DEFAULT_MIN_TRUST,
    EntityPage,
    EntitySummary,
    FactsFound,
    PromptSlice,
)

fact_search = APIRouter(prefix="/v1", tags=["facts"], responses={**COMMON})


@fact_search.get("/beings/{being}/facts/search", name="search_facts", response_model=FactsFound)
def search_facts(
    being: Being,
    engram: EngramDep,
    q: Annotated[str, Query(description="What to find (at most 4,000 characters).")],
    user: Annotated[str | None, Query(description="Only facts about this user, and the lore.")] = None,
    channel: Annotated[str | None, Query(description="The channel asking: its facts rank higher.")] = None,
    limit: Annotated[int, Query(description="Clamped to 1..24.")] = DEFAULT_FACT_HITS,
    profile: Annotated[str, Query(description="hybrid | blended | trust")] = "hybrid",
    min_trust: Annotated[
        float, Query(description="The trust profile's minimum source trust.")
    ] = DEFAULT_MIN_TRUST,
    strict: Annotated[bool, Query(description="Nothing when no fact passes the relevance gate.")] = False,
) -> FactsFound:
    """The being's facts and its spaces' that answer `q`, ranked by `profile`, each with its score by
    part; the entity cards of the hits and the pinned foundation."""
    return engram.fact_search.search(
        being.ref,
        q,
        user=user,
        channel=channel,
        limit=limit,
        profile=profile,
        min_trust=min_trust,
        strict=strict,
    )


@fact_search.get("/beings/{being}/slice", name="prompt_slice", response_model=PromptSlice)
def prompt_slice(
    being: Being,
    engram: EngramDep,
    user: Annotated[str, Query(description="Whose conversation it is.")],
    channel: Annotated[str | None, Query(description="Where: its messages and facts.")] = None,
    query: Annotated[str | None, Query(description="The message being answered.")] = None,
) -> PromptSlice:
    """Spec 001's prompt slice: the user's facts (8), relevant facts and lore (10), the channel's
    relevant messages (8), with entity cards and the foundation first."""
    return engram.fact_search.slice(being.ref, user, channel=channel, query=query)


@fact_search.get("/beings/{being}/entities", name="list_entities", response_model=list[EntitySummary])
def list_entities(being: Being, engram: EngramDep) -> list[EntitySummary]:
    """Every entity the being's facts name (merges followed), with counts of facts and mentions."""
    return engram.fact_search.entities(being.ref)


@fact_search.get("/beings/{being}/entities/{ref}", name="show_entity", response_model=EntityPage)
def show_entity(being: Being, engram: EngramDep, ref: str) -> EntityPage:
    """One entity (an alias shows the entity it was merged into, and says so)."""
    return engram.fact_search.entity(being.ref, ref)
