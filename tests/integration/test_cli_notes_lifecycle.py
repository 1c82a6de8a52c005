"""`engram notes supersede | history | merge | sweep | maintain` as a user drives them (ADR 0048)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram.services.beings import resolve_being_id
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from tests.integration.test_cli import run as cli_run  # noqa: F401  (a fixture, used by name)
from tests.note_support import old_volatile_note


@pytest.fixture
def aria(cli_run):  # noqa: F811  (test_cli's `run`: the CLI on a fresh data dir)
    cli_run("being", "create", "Aria")
    return cli_run


def _note(invoke, text: str) -> str:
    return json.loads(invoke("note", "Aria", "--kind", "knowledge", "--text", text, "--json")[1])["note_id"]


def test_supersede_and_history(aria) -> None:
    a, b, c = _note(aria, "soul one"), _note(aria, "soul two"), _note(aria, "soul three")
    _, out, _ = aria("notes", "supersede", "Aria", a, "--by", b)
    assert out.strip() == f"note {a} superseded by {b}"
    assert json.loads(aria("notes", "supersede", "Aria", b, "--by", c, "--json")[1])["reason"] == "manual"
    _, out, _ = aria("notes", "history", "Aria", b)
    lines = out.splitlines()
    assert lines[0].startswith(f"  replaced   {a}") and "soul one" in lines[0]
    assert lines[1].startswith(f"* this note  {b}")
    assert lines[2].startswith(f"  replaced by {c}")
    chain = json.loads(aria("notes", "history", "Aria", a, "--json")[1])
    assert [link["id"] for link in chain["replaced_by"]] == [b, c]


def test_refusals_have_exit_codes_and_say_why(aria) -> None:
    a, b = _note(aria, "one"), _note(aria, "two")
    code, _, err = aria("notes", "supersede", "Aria", a, "--by", a, ok=False)
    assert code == 2 and "itself" in err
    code, _, err = aria(
        "notes", "supersede", "Aria", a, "--by", "00000000-0000-0000-0000-000000000001", ok=False
    )
    assert code == 3 and "not found" in err
    aria("notes", "supersede", "Aria", a, "--by", b)
    code, _, err = aria("notes", "supersede", "Aria", b, "--by", a, ok=False)
    assert code == 4 and "superseded" in err and "Traceback" not in err
    code, _, err = aria("notes", "merge", "Aria", b, ok=False)
    assert code == 2 and "two notes or more" in err


def test_merge_without_llm(aria) -> None:
    a, b = _note(aria, "the boiler broke"), _note(aria, "the boiler was fixed")
    _, out, _ = aria("notes", "merge", "Aria", a, b, "--no-llm")
    assert out.startswith("merged 2 notes into summary ") and "without an LLM" in out
    done = json.loads(aria("notes", "merge", "Aria", _note(aria, "x"), _note(aria, "y"), "--json")[1])
    assert done["method"] == "concatenation" and len(done["sources"]) == 2
    _, out, _ = aria("notes", "history", "Aria", done["note_id"])
    assert out.count("  replaced   ") == 2


def test_sweep_and_maintain(aria, tmp_path: Path) -> None:
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
            old_volatile_note(e.ids.new_id(), being_id, "log", f"old log {i}", long_ago) for i in range(2)
        ]
        e.store.save(*olds)
    _, out, _ = aria("notes", "sweep")
    assert out.strip() == "3 notes expired"
    assert json.loads(aria("notes", "sweep", "--json")[1])["expired"] == 0
    _, out, _ = aria("notes", "maintain", "Aria")
    assert out.strip() == "2 notes merged into 1 summary"
    assert json.loads(aria("notes", "maintain", "--json")[1])["merges"] == 0
