"""The MCP tool `forget` (ADR 0075, 0076): erase one of the session's being's own notes, messages or
facts. Not offered while the being sleeps (only `SLEEP_TOOLS` are); forgetting a subject or a being
needs an admin and is not an MCP tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession


def add_forget_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """`forget`, on `session`'s being's own items."""
    being = UUID(str(session.being_id))

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True), structured_output=True
    )
    async def forget(
        kind: Annotated[Literal["note", "message", "fact"], Field(description="What the id names.")],
        id: Annotated[
            str,
            Field(
                max_length=200,
                description="The note's, message's or fact's id; for a note or a message, also the id you gave it.",
            ),
        ],
    ) -> CallToolResult:
        """Erase one of my notes, messages or facts for good: its key is destroyed, and what was made
        from it (a node, an extraction) goes with it. Forgetting it again says it already was."""
        done = await session.call(session.engram.item_forgetting.forget_item, kind, id, by="mcp", being=being)
        return CallToolResult(
            content=[TextContent(type="text", text=done.message)],
            structured_content=done.model_dump(mode="json"),
        )
