"""The `engram` CLI as a user drives it: real store, real output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli

SCENE = '{"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}'


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.stderr
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_create_list_and_refuse_duplicate(run) -> None:
    _, out, _ = run("being", "create", "Aria", "--json")
    created = json.loads(out)
    assert created["name"] == "Aria" and set(created["roots"]) == {"Business", "Private"}
    code, out, err = run("being", "create", "Aria", ok=False)
    assert code == 4 and "already exists" in err and not out
    _, out, _ = run("being", "list", "--json")
    assert [b["name"] for b in json.loads(out)] == ["Aria"]


def test_note_errors_are_one_line_without_traceback(run) -> None:
    run("being", "create", "Aria")
    code, _, err = run("note", "Aria", "--scene", '{"action": "x", "importance": 3}', ok=False)
    assert code == 2
    assert "importance" in err and "actors" in err and "Traceback" not in err
    code, _, err = run("note", "Nobody", "--scene", SCENE, ok=False)
    assert code == 3 and "not found" in err
    code, _, err = run("note", "Aria", "--scene", SCENE, "--kind", "todo", ok=False)
    assert code == 2
    code, _, err = run("note", "Aria", "--scene", SCENE, "--json", ok=False)
    assert code == 0 or json.loads(err)["error"]


def test_prose_scene_is_kept_and_reported(run) -> None:
    run("being", "create", "Aria")
    _, out, err = run("note", "Aria", "--scene", "felt great after the run")
    assert "noted scene" in out and "did not parse" in err
    _, out, _ = run("note", "Aria", "--scene", "felt great after the run", "--json")
    assert json.loads(out)["parsed"] is False


def test_idempotent_note_by_key(run) -> None:
    run("being", "create", "Aria")
    first = json.loads(run("note", "Aria", "--scene", SCENE, "--key", "m1", "--json")[1])
    second = json.loads(run("note", "Aria", "--scene", SCENE, "--key", "m1", "--json")[1])
    assert first["note_id"] == second["note_id"] and second["duplicate"] is True
    code, _, err = run("note", "Aria", "--scene", SCENE.replace("tomatoes", "beans"), "--key", "m1", ok=False)
    assert code == 4 and "idempotency key" in err


def test_file_import_validates_everything_first(run, tmp_path: Path) -> None:
    run("being", "create", "Aria")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SCENE + "\n" + SCENE.replace("2026-05-02", "2026-02-30") + "\n", encoding="utf-8")
    code, _, err = run("note", "Aria", "--file", str(bad), ok=False)
    assert code == 2 and "line 2" in err and "nothing was imported" in err
    assert json.loads(run("log", "--being", "Aria", "--json")[1])[-1]["type"] == "Cluster.Created"
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join([SCENE] * 1200 + ["a line of prose"]) + "\n", encoding="utf-8")
    result = json.loads(run("note", "Aria", "--file", str(good), "--json")[1])
    assert result["noted"] == 1201 and result["failed_to_parse"] == 1


def test_history_show_and_log(run) -> None:
    run("being", "create", "Aria")
    note = json.loads(run("note", "Aria", "--kind", "todo", "--text", "renew passport", "--json")[1])
    run("note-read", "Aria", note["note_id"])
    history = json.loads(run("history", "note", note["note_id"], "--json")[1])
    assert [h["type"] for h in history] == ["Note.Noted", "Note.MarkedRead"]
    assert json.loads(run("show", "note", note["note_id"], "--as-of", "1", "--json")[1])["read"] is False
    when = history[1]["timestamp"]
    assert json.loads(run("show", "note", note["note_id"], "--as-of", when, "--json")[1])["read"] is True
    _, out, _ = run("show", "being", "Aria")
    assert "version" in out and "Aria" in out
    code, _, err = run("show", "note", note["note_id"], "--as-of", "yesterday", ok=False)
    assert code == 2 and "--as-of" in err
    entries = json.loads(run("log", "--limit", "2", "--json")[1])
    assert [e["position"] for e in entries] == [1, 2]
    code, _, _ = run("history", "node", note["note_id"], ok=False)
    assert code == 3


def test_demo_runs_twice(run) -> None:
    _, out, _ = run("demo")
    assert "created being Aria" in out and "kept for repair" in out
    _, out, _ = run("demo")
    assert "exists already" in out and "noted 0 new note(s)" in out


def test_patrol_dry_run_lists_the_nodes_the_notes_would_become(run) -> None:
    run("being", "create", "Aria")
    run("note", "Aria", "--scene", SCENE)
    run(
        "note",
        "Aria",
        "--scene",
        SCENE.replace("Planted tomatoes with Mina", "Met a client about the budget"),
    )
    _, out, _ = run("patrol", "Aria", "--dry-run")
    lines = out.splitlines()
    notes_line = next(i for i, line in enumerate(lines) if line.strip().startswith("notes_to_nodes"))
    assert "would_create 2" in lines[notes_line]
    assert lines[notes_line + 1 : notes_line + 3] == [
        "    + 'Planted tomatoes with Mina' -> Private (root, by keywords)",
        "    + 'Met a client about the budget' -> Business (root, by keywords)",
    ]
    _, out, _ = run("nodes", "Aria", "--json")
    assert json.loads(out) == []  # nothing was written
