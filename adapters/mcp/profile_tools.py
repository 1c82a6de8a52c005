"""The MCP tool `entity_profile` (issue #12, ADR 0064): what the server's being knows of an entity
and its relationship with it, read-only. Arguments go to the service as given, so they are refused
as on every interface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from engram.services.entity_profiles import Profile

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from engram.adapters.mcp.server import EngramSession


def register_profile_tools(server: MCPServer[Any], session: EngramSession) -> None:
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def entity_profile(
        ref: Annotated[str, Field(description="The entity, <type>:<slug>, e.g. person:mina.")],
    ) -> Annotated[CallToolResult, Profile]:
        """What I know of this entity (its consolidated attributes and my recent observations) and
        my relationship with it: stranger, acquaintance, friend or ally, with its favorability."""
        profile = await session.call(session.engram.profiles.profile, being, ref)
        return CallToolResult(
            content=[TextContent(type="text", text=profile.text())],
            structured_content=profile.model_dump(),
        )
