"""The MCP tool `extract_facts` (issue #11, ADR 0058): fact extraction now, for the session's being."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession


def add_extraction_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """`extract_facts`, on `session`'s being."""
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    async def extract_facts() -> CallToolResult:
        """Extract durable facts from my users' messages not read yet, now (the worker does it every few
        seconds): messages read, facts stated, reinforced or revised, candidates rejected by reason."""
        report = await session.call(session.engram.extraction.run_until_done, being)
        return CallToolResult(
            content=[TextContent(type="text", text=report.text())], structured_content=report.as_dict()
        )
