"""The MCP tools for facts' retrieval (issue #11, ADR 0059): `search_facts` and `prompt_slice`, for the
server's one being. Arguments go to the service as given, so they are refused as on every interface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from engram.services.fact_search import DEFAULT_FACT_HITS, DEFAULT_MIN_TRUST, FactsFound, PromptSlice

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from engram.adapters.mcp.server import EngramSession


def register_fact_search_tools(server: MCPServer[Any], session: EngramSession) -> None:
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def search_facts(
        query: Annotated[str, Field(description="What to find among my durable facts.")],
        user: Annotated[str | None, Field(description="Only facts about this user, and lore.")] = None,
        channel: Annotated[str | None, Field(description="The channel asking.")] = None,
        limit: Annotated[
            int, Field(description="At most this many facts (clamped to 1..24).")
        ] = DEFAULT_FACT_HITS,
        profile: Annotated[str, Field(description="hybrid, blended or trust.")] = "hybrid",
        min_trust: Annotated[
            float, Field(description="trust profile: minimum source trust.")
        ] = DEFAULT_MIN_TRUST,
        strict: Annotated[bool, Field(description="Nothing when no fact passes the relevance gate.")] = False,
    ) -> Annotated[CallToolResult, FactsFound]:
        """My durable facts (mine and my spaces') that answer the query: entity cards first, then
        the facts, best first, each with its score."""
        found = await session.call(
            session.engram.fact_search.search,
            being,
            query,
            user=user,
            channel=channel,
            limit=limit,
            profile=profile,
            min_trust=min_trust,
            strict=strict,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=found.block or "no fact answers")],
            structured_content=found.model_dump(),
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def prompt_slice(
        user: Annotated[str, Field(description="Whose conversation it is.")],
        channel: Annotated[str | None, Field(description="Where.")] = None,
        query: Annotated[str | None, Field(description="The message being answered.")] = None,
    ) -> Annotated[CallToolResult, PromptSlice]:
        """What I remember for answering this user: their facts, relevant facts and lore, and the
        channel's relevant messages."""
        found = await session.call(
            session.engram.fact_search.slice, being, user, channel=channel, query=query
        )
        return CallToolResult(
            content=[TextContent(type="text", text=found.text or "nothing remembered for this user")],
            structured_content=found.model_dump(),
        )
