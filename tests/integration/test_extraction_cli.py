"""`engram facts extract BEING` as a user drives it, on both backends (ADR 0058). The CLI runs with
`ENGRAM_LLM=none`: the skip is recorded once per run and said so; the LLM path is the process
manager's tests (tests/integration/test_fact_extraction.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration import test_note_lifecycle_cli
from tests.integration.test_note_lifecycle_cli import Run
from tests.patrol_support import ScriptedLLM

run = test_note_lifecycle_cli.run  # the fixture: the CLI on the test's backend, with Aria made


def _skips(run: Run) -> int:
    _, out, _ = run("log", "--being", "Aria", "--limit", "10000", "--json")
    return sum(e["type"] == "ExtractionCursor.Skipped" for e in json.loads(out))


def test_facts_extract_without_an_llm_records_the_skip_once_per_run(run: Run) -> None:
    for key, text in (("m-1", "I work as a nurse in Lyon."), ("m-2", "My brother Tomas lives next door.")):
        run("message", "Aria", "--user", "lena", "--id", key, "--text", text)
    run("message", "Aria", "--user", "lena", "--id", "m-3", "--role", "assistant", "--text", "Noted!")

    _, out, _ = run("facts", "extract", "Aria")
    assert out.splitlines() == [
        "0 messages read: 0 facts stated, 0 reinforced, 0 revised",
        "2 messages skipped: no LLM is configured (ENGRAM_LLM)",
    ]
    _, out, _ = run("facts", "extract", "Aria", "--json")
    again = json.loads(out)
    assert again["skipped"] == 0 and again["messages"] == 0
    assert _skips(run) == 1

    code, _, err = run("facts", "extract", "Nobody", "--json", ok=False)
    assert code != 0 and json.loads(err)["error"] == "not_found"


def test_messages_import_extracts_facts_when_an_llm_is_configured(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM({"extract_facts": {"facts": [{"fact": "Lena works as a nurse in Lyon"}]}}, fallback={})
    monkeypatch.setattr("engram.adapters.llm.build_llm", lambda settings: llm)
    path = tmp_path / "history.jsonl"
    path.write_text(
        json.dumps(
            {"id": "h-1", "user": "lena", "text": "I work as a nurse in Lyon.", "at": "2026-10-30T09:00:00Z"}
        )
        + "\n",
        encoding="utf-8",
    )

    _, out, _ = run("messages", "import", "Aria", str(path))

    assert "facts: 1 messages read: 1 facts stated, 0 reinforced, 0 revised" in out
    assert len(llm.calls_for("extract_facts")) == 1
