"""`engram facts search`, `engram slice`, `engram entities list|show`, their HTTP routes and the MCP
`search_facts` / `prompt_slice` tools, on both backends: output as text and JSON, merges followed,
bad input refused naming the field, and a being's token kept to its being."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.cli.main import cli
from engram.adapters.http import HttpSettings, create_app
from engram.adapters.mcp.server import EngramSession, build_server
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings
from engram.services.tokens import TokenService

Run = Callable[..., tuple[int, str, str]]


def _seed(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    for text, kw in (
        ("John is my cofounder", {"entity_refs": ["person:john"], "entity_label": "John"}),
        ("John lives in Austin", {"entity_refs": ["person:john"], "importance": 2}),
        ("Johnny brews the coffee", {"entity_refs": ["person:johnny"], "importance": 2}),
        ("Mina likes green tea", {"subject": "mina"}),
    ):
        engram.facts.state("Aria", FactInput(text=text, subject=str(kw.pop("subject", "john")), **kw))  # type: ignore[arg-type]
    engram.facts.merge_entities("Aria", "person:johnny", "person:john")
    engram.facts.state("Bo", FactInput(text="Bo's cofounder is Lea", subject="lea"))


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    settings = make_settings()
    with bootstrap(settings) as engram:
        _seed(engram)
    return settings


@pytest.fixture
def run(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    if settings.database_url is not None:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", settings.database_url.get_secret_value())
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.stderr
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_cli_search_cards_and_explain(run: Run) -> None:
    _, out, _ = run("facts", "search", "Aria", "cofounder", "--strict", "--explain")
    lines = out.splitlines()
    # The card of John (merges followed: Johnny's fact is John's), then the hit and its parts.
    assert lines[0].startswith("[person:john]: ")
    assert "John lives in Austin" in lines[0] and "Johnny brews the coffee" in lines[0]
    assert "John is my cofounder" in lines[1]
    assert lines[2].strip().startswith("= semantic ")
    _, out, _ = run("facts", "search", "Aria", "cofounder", "--strict", "--json", "--limit", "99")
    found = json.loads(out)
    assert found["hits"][0]["text"] == "John is my cofounder"
    assert set(found["hits"][0]["parts"]) == {"semantic", "lexical", "confidence", "recency", "channel"}
    assert all("Lea" not in h["text"] for h in found["hits"])
    code, _, err = run("facts", "search", "Aria", "   ", "--json", ok=False)
    assert code != 0 and json.loads(err)["error"] == "invalid_input" and "query" in err


def test_cli_entities_and_slice(run: Run) -> None:
    _, out, _ = run("entities", "list", "Aria")
    assert out.splitlines() == ["person:john John: 0 facts about it, 3 mentions  (also person:johnny)"]
    _, out, _ = run("entities", "show", "Aria", "person:johnny")
    assert out.splitlines()[0] == "person:johnny is merged into person:john"
    _, out, _ = run("slice", "Aria", "--user", "mina", "--json")
    assert [h["text"] for h in json.loads(out)["user_facts"]] == ["Mina likes green tea"]
    _, out, _ = run("slice", "Aria", "--user", "mina")
    assert "About the user:\n- Mina likes green tea" in out
    code, _, err = run("entities", "show", "Aria", "not a ref", "--json", ok=False)
    assert code != 0 and json.loads(err)["error"] == "invalid_input"


def test_http_routes_and_tokens(settings: Settings) -> None:
    with bootstrap(settings) as engram:
        tokens = TokenService(engram)
        aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
        bo = {"Authorization": f"Bearer {tokens.issue(being='Bo').token}"}
        with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
            found = client.get(
                "/v1/beings/Aria/facts/search", params={"q": "cofounder", "strict": True}, headers=aria
            )
            assert found.status_code == 200, found.text
            assert found.json()["hits"][0]["text"] == "John is my cofounder"
            assert found.json()["cards"][0]["ref"] == "person:john"
            theirs = client.get("/v1/beings/Bo/facts/search", params={"q": "cofounder"}, headers=bo).json()
            assert [h["text"] for h in theirs["hits"]] == ["Bo's cofounder is Lea"]
            denied = client.get("/v1/beings/Aria/facts/search", params={"q": "cofounder"}, headers=bo)
            assert denied.status_code in (403, 404)
            bad = client.get(
                "/v1/beings/Aria/facts/search", params={"q": "x", "profile": "magic"}, headers=aria
            )
            assert bad.status_code == 422 and "profile" in bad.text
            sliced = client.get("/v1/beings/Aria/slice", params={"user": "mina"}, headers=aria)
            assert [h["text"] for h in sliced.json()["user_facts"]] == ["Mina likes green tea"]
            entities = client.get("/v1/beings/Aria/entities", headers=aria).json()
            assert [e["ref"] for e in entities] == ["person:john"]
            page = client.get("/v1/beings/Aria/entities/person:johnny", headers=aria).json()
            assert page["merged_into"] == "person:john"


@pytest.fixture
def session(settings: Settings) -> Iterator[EngramSession]:
    opened = EngramSession(lambda: bootstrap(settings), "Aria")
    yield opened
    opened.close()


def _call(session: EngramSession, tool: str, arguments: dict[str, object]) -> object:
    async def call() -> object:
        return await build_server(session).call_tool(tool, arguments)

    return anyio.run(call)


def test_mcp_tools(session: EngramSession) -> None:
    found = _call(session, "search_facts", {"query": "cofounder", "strict": True})
    assert found.structured_content["hits"][0]["text"] == "John is my cofounder"  # type: ignore[attr-defined]
    assert found.content[0].text.startswith("[person:john]: ")  # type: ignore[attr-defined]
    sliced = _call(session, "prompt_slice", {"user": "mina"})
    assert "Mina likes green tea" in sliced.content[0].text  # type: ignore[attr-defined]
    with pytest.raises(ToolError) as refused:
        _call(session, "search_facts", {"query": ""})
    assert "invalid_input" in str(refused.value) and "query" in str(refused.value)
