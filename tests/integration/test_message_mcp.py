"""The MCP `note_message` and `search_messages` tools, called in-process on the server `engram mcp`
serves, on both backends: a message taken once per id, a conflict and every shared bad input a tool
error naming the field with nothing written, and the search with its filters and hostile queries."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.mcp.server import EngramSession
from tests.integration import test_note_lifecycle_mcp
from tests.integration.test_note_lifecycle_mcp import _call
from tests.message_cases import bad_messages

session = test_note_lifecycle_mcp.session  # the fixture: the MCP server's session on Aria


def _head(session: EngramSession) -> int:
    return session.run(lambda: session.engram.store.head())


def test_a_message_is_taken_once_per_id(session: EngramSession) -> None:
    args = {"id": "m-1", "user": "mina", "text": "Shall we plant tomatoes?", "channel": "tg",
            "at": "2026-10-30T09:00:00+00:00"}  # fmt: skip
    first = _call(session, "note_message", args)
    assert first.structured_content["number"] == 1 and not first.structured_content["duplicate"]
    assert first.content[0].text.startswith("took message m-1 (#1 with mina, session ")
    head = _head(session)
    again = _call(session, "note_message", args)
    assert again.structured_content["duplicate"] and "already taken" in again.content[0].text
    with pytest.raises(ToolError) as refused:
        _call(session, "note_message", {**args, "text": "Something else"})
    assert "conflict" in str(refused.value)
    assert _head(session) == head
    answer = _call(
        session,
        "note_message",
        {
            "id": "m-2",
            "user": "mina",
            "role": "assistant",
            "text": "Yes, Saturday.",
            "urgent": True,
            "priority": 8,
        },
    )
    assert answer.structured_content["role"] == "assistant" and answer.structured_content["number"] == 2


@bad_messages("no id", "no user", "no text")  # the tool's schema requires them: see the next test
def test_bad_messages_are_tool_errors_naming_the_field(
    session: EngramSession, fields: dict[str, Any], field: str, code: str
) -> None:
    head = _head(session)
    with pytest.raises(ToolError) as refused:
        _call(session, "note_message", fields)
    assert code in str(refused.value) and field in str(refused.value), str(refused.value)
    assert _head(session) == head


@pytest.mark.parametrize("missing", ["id", "user", "text"])
def test_a_message_without_id_user_or_text_is_refused_naming_it(session: EngramSession, missing: str) -> None:
    fields = {k: v for k, v in {"id": "m-1", "user": "mina", "text": "hello"}.items() if k != missing}
    head = _head(session)
    with pytest.raises(ToolError) as refused:
        _call(session, "note_message", fields)
    assert missing in str(refused.value), str(refused.value)
    assert _head(session) == head


def test_search_messages(session: EngramSession) -> None:
    for key, channel, at in (
        ("s-1", "tg", "2026-10-30T09:00:00+00:00"),
        ("s-2", "mail", "2026-10-31T09:00:00+00:00"),
    ):
        _call(
            session,
            "note_message",
            {"id": key, "user": "mina", "channel": channel, "at": at, "text": "The tomatoes are ripe"},
        )
    found = _call(session, "search_messages", {"query": "tomatoes"})
    assert [h["id"] for h in found.structured_content["hits"]] == ["s-2", "s-1"]
    assert found.content[0].text.splitlines()[0] == (
        "- 2026-10-31 09:00 mina@mail (user): The tomatoes are ripe [id s-2]"
    )
    only = _call(session, "search_messages", {"query": "tomatoes", "channel": "tg", "limit": 1})
    assert [h["id"] for h in only.structured_content["hits"]] == ["s-1"]
    none = _call(session, "search_messages", {"query": "'; DROP TABLE message_terms; --"})
    assert none.structured_content["hits"] == [] and none.content[0].text == "no message matches"
    for hostile in ("", "x" * 10_000, "tomatoes\x00"):
        with pytest.raises(ToolError) as refused:
            _call(session, "search_messages", {"query": hostile})
        assert "invalid_input" in str(refused.value) and "query" in str(refused.value)
    assert len(_call(session, "search_messages", {"query": "ripe"}).structured_content["hits"]) == 2
