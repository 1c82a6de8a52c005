"""The MCP tool `links` (issue #12, ADR 0062): the A-MEM links between the session's being's
memories, with their scores. Read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from engram.services.memory_links import MAX_LIST

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession


def add_link_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """`links`, on `session`'s being."""
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def links(
        node: Annotated[
            str | None, Field(None, max_length=64, description="Only the links of this memory (its id).")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST, description="How many links at most.")] = 100,
    ) -> CallToolResult:
        """Links between my memories that are alike (cosine ≥ 0.7), found while I dreamt, the
        strongest first; with `node`, that memory's links."""
        report = await session.call(session.engram.links.links, being, memory_id=node, limit=limit)
        return CallToolResult(
            content=[TextContent(type="text", text=report.text())], structured_content=report.model_dump()
        )
