"""The MCP tools over a being's conversation sessions (issue #10, ADR 0053): read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from engram.domain.message import MAX_USER_CHARS
from engram.services.sessions import DEFAULT_SESSIONS, MAX_SESSIONS, SessionDetail, SessionList

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession


def add_session_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """`list_sessions` and `show_session`, on `session`'s being."""
    sessions = session.engram.sessions
    being = session.being_id

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def list_sessions(
        user: Annotated[
            str | None,
            Field(
                None, min_length=1, max_length=MAX_USER_CHARS, description="Only the sessions with this user."
            ),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=MAX_SESSIONS, description="How many at most.")
        ] = DEFAULT_SESSIONS,
    ) -> Annotated[CallToolResult, SessionList]:
        """My conversation sessions, the latest first: with whom, when, how many turns, whether it is
        open, and its summary (or the rolling summary of an open one)."""
        found = await session.call(sessions.list, being, user=user, limit=limit)
        lines = [
            f"{s.id} {s.user} #{s.ordinal} {s.started_at[:16]} {s.turns} turns "
            f"{'closed' if s.ended_at else 'open'}: "
            f"{s.summary['one_liner'] if s.summary else (s.rolling or '').split(chr(10))[0]}"
            for s in found.sessions
        ]
        content = [TextContent(type="text", text="\n".join(lines))] if lines else []
        return CallToolResult(content=content, structured_content=found.model_dump())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def show_session(
        session_id: Annotated[str, Field(min_length=1, max_length=64, description="A session id.")],
    ) -> Annotated[CallToolResult, SessionDetail]:
        """One of my sessions: its times, turns, summary, every rolling summary version and its messages."""
        detail = await session.call(sessions.show, session_id, being)
        text = detail.summary["one_liner"] if detail.summary else (detail.rolling or "(no summary yet)")
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=detail.model_dump()
        )
