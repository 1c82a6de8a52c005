"""The fact routes (issue #11, ADR 0056/0057): writing, listing, pinning and archiving facts, lore,
spaces and entity merges. Their own routers, included by `app.py` before `routes.v1` (whose
`/beings/{being}/{kind}/{item_id}` would take them); every being route resolves `{being}` through
`being_access`, so a being token reaches its own being only — and through it, its spaces' facts."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from engram.adapters.http.deps import Admin, Being, EngramDep, parse_as_of
from engram.adapters.http.problems import BAD_JSON, COMMON, CONFLICT
from engram.services.commands import MAX_BATCH_FACTS, Done, FactInput, FactsWritten, FactWritten
from engram.services.errors import NotFound
from engram.services.fact_listing import MAX_LISTED_FACTS, list_facts, list_spaces

facts = APIRouter(prefix="/v1", tags=["facts"], responses={**COMMON})
spaces_admin = APIRouter(prefix="/v1/admin", tags=["facts"], responses={**COMMON})

SpaceQuery = Annotated[
    str | None, Query(description="The space to write to; the being must be a member.", max_length=100)
]


class FactBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[FactInput] = Field(min_length=1, max_length=MAX_BATCH_FACTS)


def _shape(value: Any) -> str:
    return "batch" if isinstance(value, dict) and "facts" in value else "one"


FactBody = Annotated[
    Annotated[FactInput, Tag("one")] | Annotated[FactBatch, Tag("batch")],
    Discriminator(_shape),
    Body(description='One fact, or `{"facts": [...]}`: up to 1,000 in one transaction.'),
]


class LoreLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    line: str = Field(description="The lore line; kept as `Memory line: <line>.`", max_length=400)


class SpaceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=100)
    beings: list[str] = Field(min_length=1, max_length=100, description="Member beings, names or ids.")


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid")

    being: str = Field(max_length=100)


class Merge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alias: str = Field(max_length=120)
    into: str = Field(max_length=120)


class Unmerge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alias: str = Field(max_length=120)


@facts.post(
    "/beings/{being}/facts",
    name="state_facts",
    status_code=201,
    response_model=FactWritten | FactsWritten,
    responses={**BAD_JSON},
)
def state_facts(body: FactBody, being: Being, engram: EngramDep, space: SpaceQuery = None) -> Any:
    """State one fact, or a batch (all or none: a refused fact refuses the batch, naming its index).
    The same key again is the same fact: `outcome` says `stated`, `reinforced` or `revised`."""
    if isinstance(body, FactBatch):
        return engram.facts.state_many(being.ref, body.facts, space=space)
    return engram.facts.state(being.ref, body, space=space)


@facts.get("/beings/{being}/facts", name="list_facts")
def get_facts(
    being: Being,
    engram: EngramDep,
    subject: Annotated[str | None, Query(max_length=200)] = None,
    all: Annotated[bool, Query(description="Archived facts too.")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED_FACTS)] = 100,
) -> list[dict[str, Any]]:
    """The being's own facts and its spaces', the latest change first (active only unless `all`)."""
    return list_facts(
        engram.store, engram.views, being.ref, subject=subject, include_archived=all, limit=limit
    )


def _readable(engram: Any, being: Any, fact_id: UUID) -> None:
    engram.views.ensure(names=["facts"])
    reads = engram.views.facts
    if reads.fact(reads.owners(being.id), fact_id) is None:
        raise NotFound(f"fact {fact_id} not found")


@facts.get("/beings/{being}/facts/{fact_id}", name="show_fact")
def show_fact(
    being: Being,
    engram: EngramDep,
    fact_id: UUID,
    as_of: Annotated[
        str | None, Query(description="A version (`2`) or an ISO instant: what was believed then.")
    ] = None,
) -> dict[str, Any]:
    """One of the being's (or its spaces') facts, now or as of a version or an instant."""
    _readable(engram, being, fact_id)
    version, instant = parse_as_of(as_of)
    return engram.audit.state("fact", str(fact_id), version=version, as_of=instant)


@facts.get("/beings/{being}/facts/{fact_id}/history", name="fact_history")
def fact_history(being: Being, engram: EngramDep, fact_id: UUID) -> list[dict[str, Any]]:
    """Every version of one of the being's (or its spaces') facts, oldest first."""
    _readable(engram, being, fact_id)
    return engram.audit.history("fact", str(fact_id))


def _change(verb: str) -> None:
    @facts.post(f"/beings/{{being}}/facts/{{fact_id}}/{verb}", name=f"{verb}_fact", responses={**CONFLICT})
    def change(being: Being, engram: EngramDep, fact_id: UUID) -> Done:
        done: Done = getattr(engram.facts, verb)(being.ref, fact_id)
        return done

    change.__doc__ = f"{verb.capitalize()} one of the being's (or its spaces') facts."


for _verb in ("pin", "unpin", "archive"):
    _change(_verb)


@facts.post("/beings/{being}/lore", name="add_lore", status_code=201, response_model=FactWritten)
def add_lore(body: LoreLine, being: Being, engram: EngramDep, space: SpaceQuery = None) -> FactWritten:
    """A lore line: `Memory line: <line>.` under `__lore__`, confidence 0.72."""
    written: FactWritten = engram.facts.lore(being.ref, body.line, space=space)
    return written


@facts.get("/beings/{being}/spaces", name="being_spaces")
def being_spaces(being: Being, engram: EngramDep) -> list[dict[str, Any]]:
    """The spaces the being is in, with their members."""
    return list_spaces(engram.store, engram.views, being.ref)


@facts.delete("/beings/{being}/spaces/{name}", name="leave_space")
def leave_space(being: Being, engram: EngramDep, name: str) -> Done:
    """The being leaves the space (its token may; joining needs an admin)."""
    done: Done = engram.spaces.leave(name, being.ref)
    return done


@facts.post("/beings/{being}/entities/merge", name="merge_entities")
def merge_entities(body: Merge, being: Being, engram: EngramDep, space: SpaceQuery = None) -> Done:
    """`alias` reads as `into` from now on; a merge that makes a cycle is refused (409)."""
    done: Done = engram.facts.merge_entities(being.ref, body.alias, body.into, space=space)
    return done


@facts.post("/beings/{being}/entities/unmerge", name="unmerge_entities")
def unmerge_entities(body: Unmerge, being: Being, engram: EngramDep, space: SpaceQuery = None) -> Done:
    done: Done = engram.facts.unmerge_entities(being.ref, body.alias, space=space)
    return done


@spaces_admin.post("/spaces", name="create_space", status_code=201, responses={**CONFLICT})
def create_space(body: SpaceSpec, _: Admin, engram: EngramDep) -> Done:
    """Create a space with its member beings (admin)."""
    done: Done = engram.spaces.create(body.name, body.beings)
    return done


@spaces_admin.post("/spaces/{name}/members", name="join_space")
def join_space(body: Member, name: str, _: Admin, engram: EngramDep) -> Done:
    """A being joins the space (admin: a being cannot let itself into others' facts)."""
    done: Done = engram.spaces.join(name, body.being)
    return done


@spaces_admin.get("/spaces", name="list_spaces")
def all_spaces(_: Admin, engram: EngramDep) -> list[dict[str, Any]]:
    return list_spaces(engram.store, engram.views)
