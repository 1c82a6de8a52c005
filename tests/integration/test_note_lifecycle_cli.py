"""`engram note` with lifecycle options and `engram notes list`, as a user drives them, on both
backends: refusals name the field and write nothing; the list reads like a list."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.services.config import Settings
from tests.lifecycle_cases import bad_lifecycles, names_field

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> Run:
    settings = make_settings()
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

    invoke("being", "create", "Aria")
    return invoke


def _options(fields: dict[str, Any]) -> list[str]:
    """A case's fields as `engram note` options."""
    args = ["--kind", fields.get("kind", "todo"), "--text", "x"]
    for name, value in fields.items():
        flag = "--" + {"tags": "tag"}.get(name, name).replace("_", "-")
        if name == "kind":
            continue
        if name == "sensitivity":
            args.append("--sensitive")
        elif isinstance(value, list):
            for item in value:
                args += [flag, item]
        else:
            args += [flag, str(value)]
    return args


def _noted(run: Run) -> int:
    _, out, _ = run("log", "--being", "Aria", "--json")
    return sum(e["type"] == "Note.Noted" for e in json.loads(out))


@bad_lifecycles("unknown sensitivity")  # --sensitive is a flag: no other sensitivity to give
def test_bad_lifecycle_options_are_refused_naming_the_field(
    run: Run, fields: dict[str, Any], field: str
) -> None:
    code, out, err = run("note", "Aria", *_options(fields), "--json", ok=False)
    assert code == 2 and not out, err
    error = json.loads(err)
    assert error["error"] == "invalid_input"
    named = [str(error["details"].get("field", ""))] + [
        e["field"] for e in error["details"].get("errors", [])
    ]
    assert names_field(field, named), error
    assert _noted(run) == 0


def test_lifecycle_options_and_the_list(run: Run) -> None:
    _, out, _ = run(
        "note", "Aria", "--kind", "log", "--text", "Nightly import ran", "--stability", "volatile",
        "--ttl-days", "30", "--tag", "jobs", "--tag", "nightly", "--job-id", "job-42",
        "--at", "2026-11-20T10:00:00+00:00", "--evidence", "exit 0", "--confidence", "0.9",
        "--scope", "ops", "--subject", "import",
    )  # fmt: skip
    assert out.startswith("noted log ") and "expires 2026-12-20T10:00:00+00:00" in out
    _, out, _ = run(
        "note", "Aria", "--kind", "knowledge", "--text", "Door code 4711", "--sensitive", "--json"
    )
    assert json.loads(out)["sensitivity"] == "sensitive"
    _, out, _ = run("note", "Aria", "--kind", "soul", "--text", "Calm.", "--json")
    first_soul = json.loads(out)["note_id"]
    _, out, _ = run("note", "Aria", "--kind", "soul", "--text", "Calm and brief.")
    assert f"supersedes {first_soul}" in out
    run("note", "Aria", "--scene", '{"action": "Planted basil", "actors": ["me"], "when": ["2026-05-02"]}',
        "--tag", "garden", "--stability", "volatile", "--ttl-days", "3")  # fmt: skip

    _, out, _ = run("notes", "list", "Aria")
    lines = out.splitlines()
    assert len(lines) == 3  # the sensitive note and the superseded soul are left out
    assert "[scene]" in lines[0] and "#garden" in lines[0] and "expires" in lines[0]
    assert "[soul] Calm and brief." in lines[1] and "expires" not in lines[1]
    assert lines[2].startswith(
        "2026-11-20 10:00  [log] Nightly import ran  #jobs #nightly  expires 2026-12-20 10:00"
    )
    _, out, _ = run("notes", "list", "Aria", "--tag", "garden", "--tag", "jobs", "--json")
    assert sorted(n["kind"] for n in json.loads(out)) == ["log", "scene"]
    _, out, _ = run("notes", "list", "Aria", "--all", "--include-sensitive", "--json")
    states = {n["text"]: n["state"] for n in json.loads(out)}
    assert states["Calm."] == "superseded" and states["Door code 4711"] == "active"
    _, out, _ = run("notes", "list", "Aria", "--all", "--kind", "soul")
    assert any(line.endswith(f"({first_soul})") and "superseded by" in line for line in out.splitlines())
    _, out, _ = run("notes", "list", "Aria", "--kind", "soul", "--limit", "1", "--json")
    assert [n["text"] for n in json.loads(out)] == ["Calm and brief."]
    code, _, err = run("notes", "list", "Aria", "--limit", "0", ok=False)
    assert code == 2 and "limit" in err.lower()


def test_file_lines_carry_their_lifecycle(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    scene = {"action": "Watered the tomatoes", "actors": ["me"], "when": ["2026-05-02"]}
    path.write_text(
        json.dumps({**scene, "stability": "volatile", "ttl_days": 7, "tags": ["garden"]})
        + "\n"
        + json.dumps({**scene, "action": "Bad line", "stability": "volatile"})
        + "\n",
        encoding="utf-8",
    )
    code, _, err = run("note", "Aria", "--file", str(path), ok=False)
    assert code == 2 and "line 2: ttl_days" in err
    assert _noted(run) == 0
    code, _, err = run("note", "Aria", "--file", str(path), "--ttl-days", "3", ok=False)
    assert code == 2 and "members" in err
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    _, out, _ = run("note", "Aria", "--file", str(path), "--json")
    [taken] = json.loads(out)["notes"]
    assert taken["stability"] == "volatile" and taken["expires_at"] is not None
    _, out, _ = run("notes", "list", "Aria", "--tag", "garden", "--json")
    [listed] = json.loads(out)
    assert json.loads(listed["text"]) == scene  # the members are not part of the scene
    _, out, _ = run("note", "Aria", "--file", str(path), "--json")
    assert json.loads(out)["already_there"] == 1
