"""The MCP tools for chat messages (issue #10): `note_message` and `search_messages`, for the server's
one being. Their inputs go to `MessageInput` and the search service as given, so the tools refuse what
the CLI, HTTP and Python refuse, naming the field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from engram.services.commands import MessageInput, MessageTaken, invalid_input_of
from engram.services.message_search import DEFAULT_MESSAGE_HITS, MessagesFound

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from engram.adapters.mcp.server import EngramSession


def register_message_tools(server: MCPServer[Any], session: EngramSession) -> None:
    being = session.being_id

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        structured_output=True,
    )
    async def note_message(
        id: Annotated[str, Field(description="Your id of the message: a message is taken once per id.")],
        user: Annotated[str, Field(description="Who the conversation is with.")],
        text: Annotated[str, Field(description="The message, kept verbatim.")],
        role: Annotated[
            str, Field(description="user (what they said) or assistant (what I answered).")
        ] = "user",
        channel: Annotated[str | None, Field(description="Where it was said, e.g. telegram.")] = None,
        at: Annotated[
            str | None, Field(description="When it was said: ISO 8601 with a zone (default now).")
        ] = None,
        urgent: Annotated[bool, Field(description="Mark it urgent.")] = False,
        priority: Annotated[int | None, Field(description="0 to 10.")] = None,
    ) -> Annotated[CallToolResult, MessageTaken]:
        """Hand me one chat message (a user's, or my own answer): it joins the conversation with that
        user and its session. The same id again changes nothing."""
        try:
            item = MessageInput.model_validate(
                {
                    "id": id,
                    "user": user,
                    "text": text,
                    "role": role,
                    "channel": channel,
                    "at": at,
                    "urgent": urgent,
                    "priority": priority,
                }
            )
        except ValidationError as exc:
            refused = invalid_input_of(exc)
            raise ToolError(f"{refused.code}: {refused.message}") from exc
        taken = await session.call(session.engram.messages.take, being, item)
        where = f"session {taken.session_id}" if taken.session_id else "no session (a late message)"
        message = f"took message {taken.id} (#{taken.number} with {taken.user}, {where})" + (
            " (already taken with this id)" if taken.duplicate else ""
        )
        return CallToolResult(
            content=[TextContent(type="text", text=message)], structured_content=taken.model_dump()
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def search_messages(
        query: Annotated[str, Field(description="Words to find in my chat messages.")],
        channel: Annotated[str | None, Field(description="Only messages of this channel.")] = None,
        user: Annotated[str | None, Field(description="Only the conversation with this user.")] = None,
        limit: Annotated[
            int, Field(description="At most this many messages (1 to 100).")
        ] = DEFAULT_MESSAGE_HITS,
    ) -> Annotated[CallToolResult, MessagesFound]:
        """My chat messages that share words with the query, best first (the newest among equals),
        each with who said it, where, when, and a snippet."""
        found = await session.call(
            session.engram.message_search.search, being, query, channel=channel, user=user, limit=limit
        )
        lines = [
            f"- {h.at[:16].replace('T', ' ')} {h.user}{f'@{h.channel}' if h.channel else ''} ({h.role}): "
            f"{h.snippet} [id {h.id}]"
            for h in found.hits
        ]
        return CallToolResult(
            content=[TextContent(type="text", text="\n".join(lines) if lines else "no message matches")],
            structured_content=found.model_dump(),
        )
