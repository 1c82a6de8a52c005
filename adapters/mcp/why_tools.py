"""The MCP tool `why` (issue #13, ADR 0068): a memory's lineage, on the session's being. Read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from engram.services.lineage import why_text

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession


def add_why_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """`why`, on `session`'s being."""
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def why(
        kind: Annotated[
            Literal["node", "cluster", "note", "fact", "session", "message"],
            Field(description="What the id names."),
        ],
        id: Annotated[str, Field(max_length=64, description="The memory's id.")],
    ) -> CallToolResult:
        """Why one of my memories is as it is: where it came from and every decision that touched
        it (model, prompt version, the verbatim answer), with log positions and times."""
        report = await session.call(session.engram.why.why, being, kind, id)
        return CallToolResult(
            content=[TextContent(type="text", text=why_text(report))], structured_content=report
        )
