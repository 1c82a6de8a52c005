"""The MCP tools `supersede_note` and `merge_notes`, in-process, on SQLite and PostgreSQL: they act on
the session's being only (ADR 0048)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.mcp.server import EngramSession, build_server
from engram.domain.note import Note
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings


def test_supersede_and_merge_tools(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    with bootstrap(settings) as e:
        e.beings.register("Aria")
        e.beings.register("Bo")
        a, b, c, d = (
            e.notes.take("Aria", NoteInput(kind="knowledge", text=f"fact {i}")).note_id for i in range(4)
        )
        theirs = e.notes.take("Bo", NoteInput(kind="knowledge", text="Bo's fact")).note_id
    session = EngramSession(lambda: bootstrap(settings), "Aria")
    try:
        server = build_server(session)

        async def call(name: str, args: dict[str, Any]) -> Any:
            return await server.call_tool(name, args)

        tools = {t.name for t in anyio.run(server.list_tools)}
        assert {"supersede_note", "merge_notes"} <= tools
        done = anyio.run(call, "supersede_note", {"old": a, "by": b})
        assert done.structured_content["by"] == b and "superseded by" in done.content[0].text
        merged = anyio.run(call, "merge_notes", {"ids": [c, d]})
        assert merged.structured_content["method"] == "concatenation"
        assert "without an LLM" in merged.content[0].text
        with pytest.raises(ToolError, match="not_found"):  # another being's note: as unknown
            anyio.run(call, "supersede_note", {"old": b, "by": theirs})
        with pytest.raises(ToolError, match="invalid_transition"):  # a cycle
            anyio.run(call, "supersede_note", {"old": b, "by": a})
    finally:
        session.close()
    with bootstrap(settings) as e:
        assert e.store.get(Note, UUID(a)).superseded_by == UUID(b)
        assert e.store.get(Note, UUID(theirs)).superseded_by is None
        assert e.store.get(Note, UUID(c)).superseded_by == UUID(merged.structured_content["note_id"])
