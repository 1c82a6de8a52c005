"""The journals over HTTP (in-process, both backends) and the CLI (ADR 0054)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.domain.message import Role
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput
from engram.services.config import Settings
from engram.services.tokens import TokenService
from tests.integration.test_cli import run as cli_run  # noqa: F401  (a fixture, used by name)

DAY1 = datetime(2026, 10, 29, 9, 0, tzinfo=UTC)

Api = tuple[TestClient, dict[str, str], dict[str, str]]


def _messages(e: Engram) -> None:
    e.messages.take_many(
        "Aria",
        [
            MessageInput(id="m1", user="Mina", text="Shall we plant the tomatoes?", at=DAY1),
            MessageInput(
                id="m2",
                user="Mina",
                text="Yes, this afternoon.",
                role=Role.ASSISTANT,
                at=DAY1 + timedelta(minutes=1),
            ),
            MessageInput(id="m3", user="Mina", text="# not a header", at=DAY1 + timedelta(days=1)),
        ],
    )


@pytest.fixture
def api(engram: Engram) -> Iterator[Api]:
    """A client, Aria's being token's headers and Bo's."""
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    _messages(engram)
    tokens = TokenService(engram)
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    bo = {"Authorization": f"Bearer {tokens.issue(being='Bo').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, aria, bo


def test_memory_md_is_markdown_rendered_from_the_view(api: Api, engram: Engram) -> None:
    client, aria, _ = api
    got = client.get("/v1/beings/Aria/memory.md", headers=aria)
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/markdown")
    assert got.text == engram.journals.memory_text("Aria")
    assert "## Recent journal highlights" in got.text and "Aria: Yes, this afternoon." in got.text
    assert not (engram.settings.data_dir / "journals").exists()  # served without any file


def test_a_day_and_its_refusals(api: Api) -> None:
    client, aria, bo = api
    day = client.get("/v1/beings/Aria/journal/2026-10-30", headers=aria)
    assert day.status_code == 200 and day.headers["content-type"].startswith("text/markdown")
    assert day.text == "# Aria — journal of 2026-10-30 (UTC)\n\n- 09:00:00 Mina: \\# not a header\n"
    bad = client.get("/v1/beings/Aria/journal/2026-02-30", headers=aria)
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
    assert [e["field"] for e in bad.json()["errors"]] == ["date"], bad.json()
    none = client.get("/v1/beings/Aria/journal/2026-01-01", headers=aria)
    assert none.status_code == 404 and none.json()["code"] == "not_found"
    assert client.get("/v1/beings/Nobody/memory.md", headers=aria).status_code == 404
    # A being token never reaches another being: Aria's journal looks like a being that is not there.
    for path in ("/v1/beings/Aria/memory.md", "/v1/beings/Aria/journal/2026-10-29"):
        assert client.get(path, headers=bo).status_code == 404
    assert client.post("/v1/beings/Aria/memory.md/refresh", headers=bo).status_code == 404


def test_refresh_writes_the_files_of_this_server(api: Api, engram: Engram) -> None:
    client, aria, _ = api
    done = client.post("/v1/beings/Aria/memory.md/refresh", headers=aria)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["full"] and body["days"] == ["2026-10-29", "2026-10-30"] and body["memory"]
    folder = engram.settings.data_dir / "journals" / "Aria"
    assert body["folder"] == "Aria"  # the folder's name, never the server's path
    memory = client.get("/v1/beings/Aria/memory.md", headers=aria).text
    assert (folder / "MEMORY.md").read_text(encoding="utf-8") == memory
    again = client.post("/v1/beings/Aria/memory.md/refresh", headers=aria).json()
    assert again["days"] == [] and not again["full"]
    full = client.post("/v1/beings/Aria/memory.md/refresh?full=true", headers=aria).json()
    assert full["full"] and len(full["days"]) == 2


def test_the_cli_refreshes_and_prints(cli_run, tmp_path: Path) -> None:  # noqa: F811
    cli_run("being", "create", "Aria")
    with bootstrap(Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")) as e:
        _messages(e)
    _, out, _ = cli_run("journal", "refresh", "Aria")
    folder = tmp_path / "data" / "journals" / "Aria"
    assert out == f"rewrote Aria's journals: 2 days (2026-10-29 to 2026-10-30) and MEMORY.md in {folder}\n"
    _, out, _ = cli_run("journal", "refresh", "Aria")
    assert out == f"Aria's journals are up to date ({folder})\n"
    _, out, _ = cli_run("journal", "show", "Aria")
    assert out == (folder / "2026-10-30.md").read_text(encoding="utf-8")
    _, out, _ = cli_run("journal", "show", "Aria", "--date", "2026-10-29")
    assert out.splitlines()[2:] == [
        "- 09:00:00 Mina: Shall we plant the tomatoes?",
        "- 09:01:00 Aria: Yes, this afternoon.",
    ]
    _, out, _ = cli_run("journal", "memory", "Aria")
    assert out == (folder / "MEMORY.md").read_text(encoding="utf-8")
    done = json.loads(cli_run("journal", "refresh", "Aria", "--full", "--json")[1])
    assert done["full"] and done["days"] == ["2026-10-29", "2026-10-30"]
    code, _, err = cli_run("journal", "show", "Aria", "--date", "29/10/2026", ok=False)
    assert code == 2 and "YYYY-MM-DD" in err and "Traceback" not in err
    code, _, err = cli_run("journal", "show", "Aria", "--date", "2026-01-01", ok=False)
    assert code == 3 and "no journal for 2026-01-01" in err
    code, _, err = cli_run("journal", "memory", "Nobody", ok=False)
    assert code == 3 and "not found" in err
