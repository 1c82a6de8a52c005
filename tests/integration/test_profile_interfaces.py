"""`engram entities profile`, `engram reflections` and the MCP `entity_profile` as a user drives them
(issue #12, ADR 0064, 0065)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.mcp.server import EngramSession
from engram.services.bootstrap import bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings
from tests.integration import test_sleep_cli
from tests.integration.test_note_lifecycle_mcp import _call

run = test_sleep_cli.run  # the fixture: the CLI on a fresh data directory


def test_a_user_reads_profiles_and_reflections(run: Any) -> None:
    run("being", "create", "Aria")
    _, _, err = run("entities", "profile", "Aria")
    assert "no profile yet" in err
    run("facts", "add", "Aria", "--subject", "mina", "--text", "Mina works as a nurse", "--importance", "3")
    run(
        "facts",
        "add",
        "Aria",
        "--subject",
        "mina",
        "--text",
        "Mina's brother is Tom",
        "--entity",
        "person:tom",
    )
    _, out, _ = run("dream", "Aria", "--ticks", "3")
    assert "entity_observations 2" in out and "skipped entity_consolidation: no LLM configured" in out
    _, out, _ = run("entities", "profile", "Aria")
    assert out.splitlines() == [
        "person:mina: stranger (0.00, 0 interactions), 0 attributes, 2 observations to fold",
        "person:tom: stranger (0.00, 0 interactions), 0 attributes, 1 observations to fold",
    ]
    _, out, _ = run("entities", "profile", "Aria", "person:mina")
    assert out.startswith("person:mina: stranger (favorability 0.00, 0 interactions)")
    assert "Mina works as a nurse" in out and "attributes: none yet (not consolidated)" in out
    _, out, _ = run("entities", "profile", "Aria", "person:tom", "--json")
    assert json.loads(out)["relationship"] == {
        "state": "stranger",
        "favorability": 0.0,
        "interaction_count": 0,
    }
    code, _, err = run("entities", "profile", "Aria", "Tom!", ok=False)
    assert code != 0 and "ref" in err
    code, _, err = run("entities", "profile", "Aria", "person:nobody", ok=False)
    assert code != 0 and "no profile of person:nobody" in err
    _, out, _ = run("reflections", "Aria")
    assert out.splitlines() == [
        "importance gathered since the last reflection: 14 of 150",
        "no reflection yet",
    ]
    _, out, _ = run("reflections", "Aria", "--json")
    assert json.loads(out)["reflections"] == []


@pytest.fixture
def session(make_settings: Callable[..., Settings]) -> Iterator[EngramSession]:
    settings = make_settings()
    with bootstrap(settings) as engram:
        engram.beings.register("Aria")
        engram.beings.register("Bo")
        engram.facts.state("Aria", FactInput(text="Mina keeps bees", subject="mina"))
        engram.facts.state("Bo", FactInput(text="Lea paints", subject="lea"))
        engram.sleep.dream("Aria", ticks=3)
        engram.sleep.dream("Bo", ticks=3)
    opened = EngramSession(lambda: bootstrap(settings), "Aria")
    yield opened
    opened.close()


def test_the_mcp_tool_reads_the_servers_being_only(session: EngramSession) -> None:
    found = _call(session, "entity_profile", {"ref": "person:mina"})
    assert found.structured_content["observations"][0]["text"] == "Mina keeps bees"
    assert "person:mina: stranger" in found.content[0].text
    with pytest.raises(ToolError) as other:
        _call(session, "entity_profile", {"ref": "person:lea"})  # Bo's: not this being's
    assert "no profile of person:lea" in str(other.value)
    with pytest.raises(ToolError) as bad:
        _call(session, "entity_profile", {"ref": "Lea!"})
    assert "ref" in str(bad.value)
