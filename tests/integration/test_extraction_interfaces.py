"""Fact extraction over HTTP (in-process) and MCP, on both backends (ADR 0058): the same report as
the CLI, a being token kept to its being; without an LLM the skip is recorded once per run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.adapters.mcp.server import EngramSession, build_server
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.tokens import TokenService
from tests.session_support import chat

LINES = [("user", "I work as a nurse in Lyon."), ("assistant", "Noted!"), ("user", "Tomas lives next door.")]


def test_extract_over_http(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    chat(engram, "Aria", "lena", LINES)
    tokens = TokenService(engram)
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    bo = {"Authorization": f"Bearer {tokens.issue(being='Bo').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        assert client.post("/v1/beings/Aria/facts/extract", headers=bo).status_code in (403, 404)
        first = client.post("/v1/beings/Aria/facts/extract", headers=aria)
        assert first.status_code == 200, first.text
        assert (first.json()["skipped"], first.json()["messages"]) == (2, 0)
        again = client.post("/v1/beings/Aria/facts/extract", headers=aria)
        assert again.status_code == 200 and again.json()["skipped"] == 0


def test_extract_over_mcp(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    with bootstrap(settings) as e:
        e.beings.register("Aria")
        chat(e, "Aria", "lena", LINES)
    session = EngramSession(lambda: bootstrap(settings), "Aria")
    try:
        server = build_server(session)

        async def call(name: str, args: dict[str, Any]) -> Any:
            return await server.call_tool(name, args)

        done = anyio.run(call, "extract_facts", {})
        assert done.structured_content["skipped"] == 2
        assert "2 messages skipped: no LLM is configured" in done.content[0].text
    finally:
        session.close()
