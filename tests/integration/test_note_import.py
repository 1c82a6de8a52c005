"""`engram note BEING --file F` is safe to run again: every line is written once (#7, item 5; ADR 0025)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.domain.errors import InvalidScene
from engram.services.bootstrap import Engram
from engram.services.note_import import ImportProgress, Line, import_lines, line_key, prepare
from tests.support import ROOT

SCENE = '{"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}'


def _scene(n: int) -> str:
    return json.dumps({"action": f"Walked the dog, day {n}", "actors": ["me"], "when": ["2026-05-02"]})


def _fault_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_killed", ROOT / "scripts/faults/import_killed.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_an_import_killed_halfway_and_run_again_writes_every_line_once(tmp_path: Path) -> None:
    """A real `engram note --file` child, SIGKILLed once half its lines are in, then run twice more."""
    results = _fault_script().check(tmp_path, lines=3000)
    assert len(results) == 4
    assert all(r.startswith("held: ") for r in results), "\n".join(results)


def test_keys_survive_lines_added_anywhere_and_tell_identical_lines_apart() -> None:
    before = [Line(1, _scene(1)), Line(2, SCENE), Line(3, SCENE)]
    after = [Line(1, _scene(0)), Line(2, _scene(1)), Line(3, SCENE), Line(4, _scene(9)), Line(5, SCENE)]
    keys_before = [n.idempotency_key for n in prepare("/data/a.jsonl", before, None)]
    keys_after = [n.idempotency_key for n in prepare("/data/a.jsonl", after, None)]
    assert len(set(keys_before)) == 3  # the two identical lines are two notes, as they were two lines
    assert set(keys_before) <= set(keys_after)
    assert keys_before[1] == line_key("/data/a.jsonl", SCENE, 1)
    # Another file is another source: its lines are its own notes.
    assert prepare("/data/b.jsonl", before, None)[0].idempotency_key != keys_before[0]


def test_a_line_with_its_own_key_uses_it_and_the_key_is_not_part_of_the_scene() -> None:
    line = json.dumps({"key": "msg-1042", **json.loads(SCENE)})
    [item] = prepare("/data/a.jsonl", [Line(1, line)], None)
    assert item.idempotency_key == "msg-1042"
    assert json.loads(item.text) == json.loads(SCENE)
    with pytest.raises(InvalidScene) as caught:
        prepare("/data/a.jsonl", [Line(1, json.dumps({"key": 7, **json.loads(SCENE)}))], None)
    assert caught.value.errors == [{"field": "line 1", "message": "`key` is a string of 1 to 200 characters"}]


def test_a_refused_line_does_not_stop_the_others(sqlite_engram: Engram) -> None:
    sqlite_engram.beings.register("Aria")
    first = [Line(1, json.dumps({"key": "k", **json.loads(SCENE)}))]
    import_lines(sqlite_engram.notes, "Aria", "/data/a.jsonl", first)
    again = [
        Line(1, _scene(1)),
        Line(2, json.dumps({"key": "k", **json.loads(_scene(2))})),
        Line(3, _scene(3)),
    ]
    seen: list[dict[str, int]] = []
    report = import_lines(
        sqlite_engram.notes,
        "Aria",
        "/data/a.jsonl",
        again,
        progress=lambda p: seen.append(p.as_dict()),
        batch_size=2,
    )
    assert [r["line"] for r in report.refused] == [2]
    assert "used with other content" in report.refused[0]["reason"]
    assert report.progress == ImportProgress(total=3, read=3, written=2, already_there=0, refused=1)
    assert [(s["read"], s["written"], s["refused"]) for s in seen] == [(2, 1, 1), (3, 2, 1)]


def test_the_cli_shows_progress_and_a_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()
    assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
    path = tmp_path / "scenes.jsonl"
    path.write_text("\n".join(_scene(n) for n in range(1200)) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["note", "Aria", "--file", str(path)])
    assert result.exit_code == 0, result.stderr
    assert (
        result.stdout.strip() == f"noted 1200 scene(s) from {path}: 1200 written, 0 already there, 0 refused"
    )
    progress = result.stderr.strip().splitlines()
    assert progress[0] == "noting scenes.jsonl: read 500/1200 lines, written 500, already there 0, refused 0"
    assert (
        progress[-1] == "noting scenes.jsonl: read 1200/1200 lines, written 1200, already there 0, refused 0"
    )
    path.write_text(path.read_text(encoding="utf-8") + _scene(5000) + "\n", encoding="utf-8")  # the file grew
    again = json.loads(runner.invoke(cli, ["note", "Aria", "--file", str(path), "--json"]).stdout)
    assert (again["written"], again["already_there"], again["refused"], again["noted"]) == (1, 1200, 0, 1201)
    # A key conflict is reported line by line, after the rest was written: exit 4.
    path.write_text(
        json.dumps({"key": "x", **json.loads(SCENE)})
        + "\n"
        + json.dumps({"key": "x", **json.loads(_scene(1))})
    )
    result = runner.invoke(cli, ["note", "Aria", "--file", str(path)])
    assert result.exit_code == 4
    assert "1 written, 0 already there, 1 refused" in result.stdout
    assert "refused: line 2: idempotency key 'x' was used with other content" in result.stderr


def test_text_without_kind_asks_for_a_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()
    runner.invoke(cli, ["being", "create", "Aria"])
    result = runner.invoke(cli, ["note", "Aria", "--text", "Renew the passport"])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: --text needs --kind (todo, reminder, knowledge, rule, preference,"
    )
    log = json.loads(runner.invoke(cli, ["log", "--being", "Aria", "--json"]).stdout)
    assert not any(e["type"] == "Note.Noted" for e in log)  # nothing was stored
    result = runner.invoke(cli, ["note", "Aria", "--text", "Renew the passport", "--kind", "todo", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["kind"] == "todo"


def test_lifecycle_members_leave_the_scene_and_the_whole_line_keys_it() -> None:
    """A line without members keeps the key it always had; a line with members is keyed by the whole
    line, so the same line keeps its key and a line whose TTL changed is another line (ADR 0047)."""
    with_ttl = json.dumps({**json.loads(SCENE), "ttl_days": 7, "stability": "volatile", "tags": ["a"]})
    longer = json.dumps({**json.loads(SCENE), "ttl_days": 8, "stability": "volatile", "tags": ["a"]})
    plain, first, other = prepare("/data/a.jsonl", [Line(1, SCENE), Line(2, with_ttl), Line(3, longer)], None)
    assert plain.idempotency_key == line_key("/data/a.jsonl", SCENE, 1) and plain.text == SCENE
    assert first.idempotency_key == line_key("/data/a.jsonl", with_ttl, 1)
    assert other.idempotency_key not in (first.idempotency_key, plain.idempotency_key)
    assert json.loads(first.text) == json.loads(SCENE)
    assert (first.ttl_days, first.stability, first.tags) == (7, "volatile", ["a"])
    own = json.dumps({"key": "k", **json.loads(SCENE), "scope": "garden"})
    [keyed] = prepare("/data/a.jsonl", [Line(1, own)], None)
    assert (keyed.idempotency_key, keyed.scope, json.loads(keyed.text)) == ("k", "garden", json.loads(SCENE))


def test_a_bad_lifecycle_member_names_its_line_and_field() -> None:
    from datetime import UTC, datetime

    lines = [
        Line(1, json.dumps({**json.loads(SCENE), "stability": "volatile"})),
        Line(2, json.dumps({**json.loads(SCENE), "ttl_days": "soon"})),
        Line(3, json.dumps({**json.loads(SCENE), "colour": "red"})),
    ]
    with pytest.raises(InvalidScene) as caught:
        prepare("/data/a.jsonl", lines, None, datetime(2026, 11, 1, tzinfo=UTC))
    fields = [e["field"] for e in caught.value.errors]
    assert fields[0] == "line 1: ttl_days" and fields[1] == "line 2: ttl_days"
    assert fields[2].startswith("line 3")  # not a lifecycle member: the scene schema refuses it
