"""The context pack through the CLI (`engram pack`), HTTP (`GET /v1/beings/{being}/pack`) and the
node lists' sensitive switch (`engram nodes --include-sensitive`, an admin token), ADR 0049."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.tokens import TokenService
from tests.integration.test_cli import run as run  # the CLI runner fixture, shared
from tests.patrol_support import scene


def test_cli_pack_prints_the_pack_and_its_json(run: Any) -> None:
    run("being", "create", "Aria")
    _, out, _ = run("pack", "Aria")
    assert out == ""  # no note: nothing to print
    run("note", "Aria", "--kind", "knowledge", "--text", "The garage door code is 4321")
    run("note", "Aria", "--kind", "todo", "--text", "Book the flights to Lisbon")
    _, out, _ = run("pack", "Aria")
    assert out == (
        "## Memory Context\n\n[todo] Book the flights to Lisbon\n\n[knowledge] The garage door code is 4321\n"
    )
    _, out, _ = run("pack", "Aria", "--query", "garage code", "--limit", "1", "--json")
    found = json.loads(out)
    assert [n["text"] for n in found["notes"]] == ["The garage door code is 4321"]
    assert found["query"] == "garage code" and found["being"] == "Aria"
    code, _, err = run("pack", "Aria", "--limit", "0", ok=False)
    assert code == 2 and "limit" in err.lower()


@pytest.fixture
def api(engram: Engram) -> Iterator[tuple[TestClient, dict[str, str], dict[str, str]]]:
    engram.beings.register("Aria")
    tokens = TokenService(engram)
    admin = tokens.issue(admin=True).token
    own = tokens.issue(being="Aria").token
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, {"Authorization": f"Bearer {admin}"}, {"Authorization": f"Bearer {own}"}


def test_http_pack_and_the_node_list_of_sensitive_memories(
    engram: Engram, api: tuple[TestClient, dict[str, str], dict[str, str]]
) -> None:
    client, admin, own = api
    engram.notes.take("Aria", NoteInput(kind="log", text="Asked about the garage door"))
    engram.notes.take("Aria", NoteInput(kind="log", text="The safe code is 9999", sensitivity="sensitive"))
    r = client.get("/v1/beings/Aria/pack", headers=own)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "## Memory Context\n\n[log] Asked about the garage door"
    r = client.get("/v1/beings/Aria/pack", headers=admin, params={"query": "safe code"})
    assert r.status_code == 200 and "9999" not in r.text  # not even an admin's pack shows it
    r = client.get("/v1/beings/Aria/pack", headers=own, params={"limit": 0})
    assert r.status_code in (400, 422) and "limit" in r.text
    engram.notes.take_many(
        "Aria",
        [
            NoteInput(text=scene("Planted tomatoes", "2026-05-02")),
            NoteInput(text=scene("Hid the spare key under the pot", "2026-05-02"), sensitivity="sensitive"),
        ],
    )
    engram.patrol("Aria")
    mine = client.get("/v1/beings/Aria/nodes", headers=own).json()
    every = client.get("/v1/beings/Aria/nodes", headers=admin).json()
    assert [n["action"] for n in mine] == ["Planted tomatoes"]
    assert sorted(n["action"] for n in every) == ["Hid the spare key under the pot", "Planted tomatoes"]
    assert [n["sensitive"] for n in every if n["action"].startswith("Hid")] == [True]
