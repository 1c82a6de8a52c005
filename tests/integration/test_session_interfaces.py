"""Issue #10: sessions on every interface (CLI, HTTP, MCP, the context with a user), on both
backends; another being's session reads as unknown (ADR 0053)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.cli.main import cli
from engram.adapters.http.app import create_app
from engram.adapters.http.config import HttpSettings
from engram.adapters.mcp.server import EngramSession, build_server
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.tokens import TokenService
from tests.session_support import CHAT, T0, chat, summarize


def _history(engram: Engram) -> tuple[str, str]:
    """Aria: a closed, summarized session with lena and an open one with a rolling summary; Bo: a
    session of its own. Returns (Aria's closed session id, Bo's session id)."""
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    chat(engram, "Aria", "lena", CHAT)
    later = [("user", f"Back again, the garden project goes well, day {i}.") for i in range(5)]
    chat(engram, "Aria", "lena", later, start=T0 + timedelta(hours=3), prefix="b")
    theirs = chat(engram, "Bo", "lena", CHAT[:2], prefix="bo")
    summarize(engram, "Aria")
    more = [("user", f"And the beans came up, row {i}.") for i in range(4)]  # a rolling summary due
    added = chat(engram, "Aria", "lena", more, start=T0 + timedelta(hours=3, minutes=5), prefix="x")
    assert len({m.session_id for m in added}) == 1 and added[0].session_id is not None
    engram.views.ensure()
    being_id = UUID(added[0].being_id)
    [old] = [s for s in engram.views.conversations.sessions(being_id) if s["ordinal"] == 1]
    return old["id"], str(theirs[0].session_id)


def test_the_cli_lists_shows_and_summarizes_sessions(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings()
    with bootstrap(settings) as e:
        closed_id, theirs = _history(e)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    if settings.database_url is not None:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", settings.database_url.get_secret_value())
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> tuple[str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.stderr
        return result.stdout, result.stderr

    out, _ = run("sessions", "list", "Aria", "--user", "lena")
    state, *lines = out.splitlines()  # first where the conversation with lena stands, then its sessions
    assert state.startswith("lena: 21 messages") and "open session: 9 turns" in state
    assert len(lines) == 2 and "#2" in lines[0] and "open" in lines[0]
    assert closed_id in lines[1] and "closed (gap)" in lines[1] and "12 messages with lena" in lines[1]
    listed = json.loads(run("sessions", "list", "Aria", "--limit", "1", "--json")[0])
    assert [s["ordinal"] for s in listed["sessions"]] == [2]

    out, _ = run("sessions", "show", closed_id)
    assert f"session {closed_id}: Aria with lena, #1" in out and "closed (gap)" in out
    assert "summary (extractive): 12 messages with lena" in out and "messages (12):" in out
    shown = json.loads(run("sessions", "show", closed_id, "--being", "Aria", "--json")[0])
    assert shown["summary_method"] == "extractive" and len(shown["messages"]) == 12
    _, err = run("sessions", "show", theirs, "--being", "Aria", code=3)  # Bo's session, asked of Aria
    assert "not found" in err

    out, _ = run("sessions", "summarize", "Aria")
    assert out.startswith("1 conversations: 0 session summaries, 1 rolling summaries, 1 spines")
    _, err = run("sessions", "resummarize", "Aria", code=4)
    assert "no LLM is configured" in err

    out, _ = run("context", "Aria", "--user", "lena")
    assert "# Your conversation with lena" in out and "## Last session (2026-10-30)" in out
    assert "## This session so far" in out and "## Profile" in out
    data = json.loads(run("context", "Aria", "--user", "lena", "--json")[0])
    assert data["conversation"]["last_session"]["session_id"] == closed_id
    assert any("nurse" in item for item in data["conversation"]["spine"]["PROFILE"])  # 21 messages
    plain = json.loads(run("context", "Aria", "--json")[0])
    assert plain["conversation"] is None and "Your conversation" not in plain["text"]


def test_http_lists_and_shows_sessions_of_the_being_only(engram: Engram) -> None:
    closed_id, theirs = _history(engram)
    token = TokenService(engram).issue(admin=True).token
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        listed = client.get("/v1/beings/Aria/sessions", params={"user": "lena"}, headers=auth)
        assert listed.status_code == 200
        assert [s["ordinal"] for s in listed.json()["sessions"]] == [2, 1]
        shown = client.get(f"/v1/beings/Aria/sessions/{closed_id}", headers=auth)
        assert shown.status_code == 200 and shown.json()["turns"] == 12
        assert shown.json()["summary"]["one_liner"].startswith("12 messages with lena")
        assert client.get(f"/v1/beings/Aria/sessions/{theirs}", headers=auth).status_code == 404
        assert client.get("/v1/beings/Aria/sessions/not-a-uuid", headers=auth).status_code == 404
        assert client.get("/v1/beings/Aria/sessions", params={"limit": 0}, headers=auth).status_code == 422
        context = client.get("/v1/beings/Aria/context", params={"user": "lena"}, headers=auth).json()
        assert context["conversation"]["rolling"] and "# Your conversation with lena" in context["text"]
        stranger = client.get("/v1/beings/Aria/context", params={"user": "mo"}, headers=auth).json()
        assert stranger["conversation"] == {
            "user": "mo",
            "state": None,
            "last_session": None,
            "rolling": None,
            "spine": None,
            "history": None,  # until the session is compacted (ADR 0067)
            "text": "# Your conversation with mo\nNothing yet: no summary of a session with them.",
        }
        long_user = client.get("/v1/beings/Aria/context", params={"user": "x" * 201}, headers=auth)
        assert long_user.status_code == 422


def test_mcp_tools_read_sessions(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    with bootstrap(settings) as e:
        closed_id, theirs = _history(e)
    session = EngramSession(lambda: bootstrap(settings), "Aria")
    try:
        server = build_server(session)

        async def call(name: str, args: dict[str, Any]) -> Any:
            return await server.call_tool(name, args)

        tools = {t.name: t for t in anyio.run(server.list_tools)}
        assert tools["list_sessions"].annotations.read_only_hint  # type: ignore[union-attr]
        listed = anyio.run(call, "list_sessions", {"user": "lena"})
        assert [s["ordinal"] for s in listed.structured_content["sessions"]] == [2, 1]
        shown = anyio.run(call, "show_session", {"session_id": closed_id})
        assert shown.structured_content["id"] == closed_id and "12 messages" in shown.content[0].text
        with pytest.raises(ToolError, match="not_found"):
            anyio.run(call, "show_session", {"session_id": theirs})
        context = anyio.run(call, "context", {"user": "lena"})
        assert context.structured_content["conversation"]["last_session"]["session_id"] == closed_id
    finally:
        session.close()


def test_the_state_of_a_conversation_is_in_the_list_and_the_context(
    make_settings: Callable[..., Settings],
) -> None:
    """Spec 004's SessionState of one user: count over all sessions, last interaction, last user
    message (cleaned, truncated), the open session's turns."""
    with bootstrap(make_settings()) as e:
        _history(e)
        long = "and   finally   " + "a very long message " * 20
        chat(
            e,
            "Aria",
            "lena",
            [("user", long), ("assistant", "Noted.")],
            start=T0 + timedelta(hours=3, minutes=9),
            prefix="z",
        )

        state = e.sessions.list("Aria", user="lena").state
        assert state is not None and e.sessions.list("Aria").state is None
        assert state.message_count == len(CHAT) + 5 + 4 + 2
        assert state.last_interaction is not None and state.last_interaction.startswith("2026-10-30T13:10")
        assert state.last_user_message is not None and state.last_user_message.startswith(
            "and finally a very"
        )
        assert len(state.last_user_message) == 200  # the assistant's answer is not the user's message
        assert state.open_session is not None and state.open_turns == 5 + 4 + 2
        context = e.reading.context("Aria", user="lena")
        assert context.conversation is not None and context.conversation.state == state
