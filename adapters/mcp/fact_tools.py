"""The MCP tools for facts (issue #11): `add_fact`, `list_facts`, `add_lore`, `change_fact` and
`merge_entities`, for the server's one being (and the spaces it is in). Their inputs go to `FactInput`
as given, so the tools refuse what the CLI, HTTP and Python refuse, naming the field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from engram.domain.errors import DomainError
from engram.services.commands import FactInput, FactWritten, invalid_input_of
from engram.services.fact_listing import list_facts

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from engram.adapters.mcp.server import EngramSession


def _said(w: FactWritten) -> str:
    return f"{w.outcome} fact {w.fact_id} ({w.owner_kind} {w.owner}, version {w.version}, importance {w.importance})"


def register_fact_tools(server: MCPServer[Any], session: EngramSession) -> None:
    being = session.being_id

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
        structured_output=True,
    )
    async def add_fact(
        text: Annotated[str, Field(description="The fact, one line, e.g. 'Mina lives in Austin'.")],
        subject: Annotated[str, Field(description="Who or what it is about: a user id or an entity ref.")],
        type: Annotated[
            str, Field(description="preference, profile, relationship, project or other.")
        ] = "other",
        memory_key: Annotated[
            str | None, Field(description="type|entityType|primaryRef|factType: updates it in place.")
        ] = None,
        importance: Annotated[
            int, Field(description="0 trivial, 1 standard, 2 significant, 3 critical.")
        ] = 1,
        pinned: Annotated[bool, Field(description="Pin it: importance 3, never archived.")] = False,
        entity_refs: Annotated[
            list[str] | None, Field(description="<type>:<slug> refs, e.g. person:john.")
        ] = None,
        evidence: Annotated[str | None, Field(description="What it was read from.")] = None,
        confidence: Annotated[float, Field(description="0 to 1.")] = 1.0,
        channel: Annotated[str | None, Field(description="A ranking hint.")] = None,
        source_trust: Annotated[float, Field(description="How far its source is trusted, 0 to 1.")] = 1.0,
        space: Annotated[str | None, Field(description="Write it to a space I am in.")] = None,
    ) -> Annotated[CallToolResult, FactWritten]:
        """Remember a durable fact. Stated again it is reinforced; with the same memory key and other
        words it is revised (its history kept)."""
        try:
            item = FactInput.model_validate(
                {
                    "text": text,
                    "subject": subject,
                    "type": type,
                    "memory_key": memory_key,
                    "importance": importance,
                    "pinned": pinned,
                    "entity_refs": entity_refs or [],
                    "evidence": evidence,
                    "confidence": confidence,
                    "channel": channel,
                    "source_trust": source_trust,
                }
            )
            item.content()  # the domain's checks, here so that the error names its field
        except ValidationError as exc:
            refused = invalid_input_of(exc)
            raise ToolError(f"{refused.code}: {refused.message}") from exc
        except DomainError as exc:
            field = exc.details.get("field")
            named = (
                exc.message if not field or exc.message.startswith(str(field)) else f"{field}: {exc.message}"
            )
            raise ToolError(f"{exc.code}: {named}") from exc
        written = await session.call(session.engram.facts.state, being, item, space=space)
        return CallToolResult(
            content=[TextContent(type="text", text=_said(written))], structured_content=written.model_dump()
        )

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
        structured_output=True,
    )
    async def add_lore(
        line: Annotated[str, Field(description="A line about my world, kept as 'Memory line: <line>.'")],
        space: Annotated[str | None, Field(description="Keep it in a space I am in.")] = None,
    ) -> Annotated[CallToolResult, FactWritten]:
        """Keep a lore line (the latest 120 stay active)."""
        written = await session.call(session.engram.facts.lore, being, line, space=space)
        return CallToolResult(
            content=[TextContent(type="text", text=_said(written))], structured_content=written.model_dump()
        )

    @server.tool(name="list_facts", annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def list_facts_tool(
        subject: Annotated[str | None, Field(description="Only facts about this subject.")] = None,
        all: Annotated[bool, Field(description="Archived facts too.")] = False,
        limit: Annotated[int, Field(description="At most this many (1 to 1000).")] = 100,
    ) -> dict[str, Any]:
        """My facts and my spaces' facts, the latest change first (active only unless `all`)."""
        rows = await session.call(
            lambda: list_facts(
                session.engram.store,
                session.engram.views,
                str(being),
                subject=subject,
                include_archived=all,
                limit=limit,
            )
        )
        return {"facts": rows}

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        structured_output=True,
    )
    async def change_fact(
        fact_id: Annotated[
            str, Field(description="The fact's id (from add_fact, list_facts or search_facts).")
        ],
        change: Annotated[
            str,
            Field(
                description="pin (importance 3, never archived), unpin, or archive (hide it, history kept)."
            ),
        ],
    ) -> dict[str, Any]:
        """Pin, unpin or archive one of my facts or of my spaces' facts."""
        verbs = {"pin": session.engram.facts.pin, "unpin": session.engram.facts.unpin}
        verbs["archive"] = session.engram.facts.archive
        if change not in verbs:
            raise ToolError("invalid_input: change: one of pin, unpin, archive")
        try:
            fact = UUID(fact_id)
        except ValueError:
            raise ToolError(f"not_found: fact {fact_id} not found") from None
        done = await session.call(verbs[change], being, fact)
        return done.model_dump()

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
        structured_output=True,
    )
    async def merge_entities(
        alias: Annotated[str, Field(description="The ref that is another's variant, e.g. person:makesh.")],
        into: Annotated[
            str | None,
            Field(description="The ref it reads as, e.g. person:mukesh; omit to unmerge the alias."),
        ] = None,
        space: Annotated[str | None, Field(description="Merge them in a space I am in.")] = None,
    ) -> dict[str, Any]:
        """Read one entity ref as another from now on (speech-to-text variants), or undo that."""
        if into is None:
            done = await session.call(session.engram.facts.unmerge_entities, being, alias, space=space)
        else:
            done = await session.call(session.engram.facts.merge_entities, being, alias, into, space=space)
        return done.model_dump()
