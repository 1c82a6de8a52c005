"""The MCP `note` and `note_scene` tools with lifecycle parameters, called in-process on the server
`engram mcp` serves, on both backends: bad inputs are tool errors naming the field, nothing written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.mcp.server import EngramSession, build_server
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.lifecycle_cases import bad_lifecycles

SCENE = {"action": "Watered the tomatoes", "actors": ["me"], "when": ["2026-05-02"]}


@pytest.fixture
def session(make_settings: Callable[..., Settings]) -> Iterator[EngramSession]:
    settings = make_settings()
    with bootstrap(settings) as engram:
        engram.beings.register("Aria")
    opened = EngramSession(lambda: bootstrap(settings), "Aria")
    yield opened
    opened.close()


def _call(session: EngramSession, tool: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        return await build_server(session).call_tool(tool, arguments)

    return anyio.run(call)


def _arguments(fields: dict[str, Any]) -> dict[str, Any]:
    """A case's fields as the tool's parameters (`sensitive` is a flag)."""
    return {"kind": "todo", "text": "x", **fields}


@bad_lifecycles("unknown sensitivity")  # `sensitive` is a flag: no other sensitivity to give
def test_bad_lifecycles_are_tool_errors_naming_the_field(
    session: EngramSession, fields: dict[str, Any], field: str
) -> None:
    head = session.run(lambda: session.engram.store.head())
    with pytest.raises(ToolError) as refused:
        _call(session, "note", _arguments(fields))
    assert "invalid_input" in str(refused.value) and field in str(refused.value), str(refused.value)
    assert session.run(lambda: session.engram.store.head()) == head


def test_the_tools_take_the_lifecycle(session: EngramSession) -> None:
    log = _call(
        session,
        "note",
        {
            "kind": "log",
            "text": "Nightly import ran",
            "stability": "volatile",
            "ttl_days": 30,
            "tags": ["jobs"],
            "evidence": ["exit 0"],
            "confidence": 0.9,
            "scope": "ops",
            "subject": "import",
            "job_id": "job-42",
            "at": "2026-11-01T10:00:00+00:00",
        },
    )
    assert log.structured_content["expires_at"] == "2026-12-01T10:00:00+00:00"
    assert "expires 2026-12-01" in log.content[0].text
    secret = _call(session, "note", {"kind": "knowledge", "text": "Door code 4711", "sensitive": True})
    assert secret.structured_content["sensitivity"] == "sensitive"
    first = _call(session, "note", {"kind": "soul", "text": "Calm."}).structured_content
    second = _call(session, "note", {"kind": "soul", "text": "Calm and brief."})
    assert second.structured_content["superseded"] == [first["note_id"]]
    assert "supersedes" in second.content[0].text
    scene = _call(session, "note_scene", {"scene": SCENE, "stability": "volatile", "ttl_days": 3})
    assert scene.structured_content["stability"] == "volatile"
    listed = session.run(session.engram.listing.notes, "Aria", include_inactive=True, include_sensitive=True)
    by_text = {n.text: n for n in listed}
    assert by_text["Nightly import ran"].job_id == "job-42" and by_text["Nightly import ran"].tags == ["jobs"]
    assert by_text["Calm."].state == "superseded"


def test_the_note_tool_describes_the_new_kinds(session: EngramSession) -> None:
    async def tools() -> Any:
        return await build_server(session).list_tools()

    [note] = [t for t in anyio.run(tools) if t.name == "note"]
    description = note.input_schema["properties"]["kind"]["description"]
    assert all(kind in description for kind in ("log", "summary", "soul"))
    assert {"stability", "ttl_days", "tags", "evidence", "confidence", "scope", "subject", "job_id", "at",
            "sensitive"} <= set(note.input_schema["properties"])  # fmt: skip
