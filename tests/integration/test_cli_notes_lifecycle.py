"""`engram notes supersede | history | merge | sweep | maintain` as a user drives them (ADR 0048)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.domain.note import Note
from engram.services.beings import resolve_being_id
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.stderr
        return result.exit_code, result.stdout, result.stderr

    invoke("being", "create", "Aria")
    return invoke


def _note(run, text: str) -> str:
    return json.loads(run("note", "Aria", "--kind", "knowledge", "--text", text, "--json")[1])["note_id"]


def test_supersede_and_history(run) -> None:
    a, b, c = _note(run, "soul one"), _note(run, "soul two"), _note(run, "soul three")
    _, out, _ = run("notes", "supersede", "Aria", a, "--by", b)
    assert out.strip() == f"note {a} superseded by {b}"
    assert json.loads(run("notes", "supersede", "Aria", b, "--by", c, "--json")[1])["reason"] == "manual"
    _, out, _ = run("notes", "history", "Aria", b)
    lines = out.splitlines()
    assert lines[0].startswith(f"  replaced   {a}") and "soul one" in lines[0]
    assert lines[1].startswith(f"* this note  {b}")
    assert lines[2].startswith(f"  replaced by {c}")
    chain = json.loads(run("notes", "history", "Aria", a, "--json")[1])
    assert [link["id"] for link in chain["replaced_by"]] == [b, c]


def test_refusals_have_exit_codes_and_say_why(run) -> None:
    a, b = _note(run, "one"), _note(run, "two")
    code, _, err = run("notes", "supersede", "Aria", a, "--by", a, ok=False)
    assert code == 2 and "itself" in err
    code, _, err = run(
        "notes", "supersede", "Aria", a, "--by", "00000000-0000-0000-0000-000000000001", ok=False
    )
    assert code == 3 and "not found" in err
    run("notes", "supersede", "Aria", a, "--by", b)
    code, _, err = run("notes", "supersede", "Aria", b, "--by", a, ok=False)
    assert code == 4 and "superseded" in err and "Traceback" not in err
    code, _, err = run("notes", "merge", "Aria", b, ok=False)
    assert code == 2 and "two notes or more" in err


def test_merge_without_llm(run) -> None:
    a, b = _note(run, "the boiler broke"), _note(run, "the boiler was fixed")
    _, out, _ = run("notes", "merge", "Aria", a, b, "--no-llm")
    assert out.startswith("merged 2 notes into summary ") and "without an LLM" in out
    done = json.loads(run("notes", "merge", "Aria", _note(run, "x"), _note(run, "y"), "--json")[1])
    assert done["method"] == "concatenation" and len(done["sources"]) == 2
    _, out, _ = run("notes", "history", "Aria", done["note_id"])
    assert out.count("  replaced   ") == 2


def test_sweep_and_maintain(run, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    with bootstrap(settings) as e:
        long_ago = datetime.now(UTC) - timedelta(days=20)
        e.notes.take_many(
            "Aria",
            [
                NoteInput(kind="knowledge", text=f"code {i}", stability="volatile", ttl_days=1, at=long_ago)
                for i in range(3)
            ],
        )
        being_id = resolve_being_id(e.store, "Aria")
        olds = [
            Note._create(
                Note.Noted,
                id=e.ids.new_id(),
                being_id=being_id,
                kind="log",
                text=f"old log {i}",
                idempotency_key=None,
                source_ref=None,
                timestamp=long_ago,
                stability="volatile",
                ttl_days=None,
                expires_at=None,
                sensitivity="normal",
                confidence=1.0,
                evidence=[],
                tags=[],
                scope="user",
                subject=None,
                job_id=None,
                at=long_ago,
            )
            for i in range(2)
        ]
        e.store.save(*olds)
    _, out, _ = run("notes", "sweep")
    assert out.strip() == "3 notes expired"
    assert json.loads(run("notes", "sweep", "--json")[1])["expired"] == 0
    _, out, _ = run("notes", "maintain", "Aria")
    assert out.strip() == "2 notes merged into 1 summary"
    assert json.loads(run("notes", "maintain", "--json")[1])["merges"] == 0
