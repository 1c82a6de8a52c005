"""`engram why` as a user drives it (SQLite, hashing embedder): the readable tree, `--json`, and
the exit code of an unknown id (issue #13, ADR 0068)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from tests.patrol_support import scene


def test_why_prints_a_tree_and_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.stderr
        return result.stdout + result.stderr

    run("being", "create", "Aria")
    run(
        "note",
        "Aria",
        "--scene",
        scene("Planted tomatoes in the garden with Mina", "2026-05-02"),
        "--key",
        "k-1",
    )
    run("patrol", "Aria")
    [node] = json.loads(run("nodes", "Aria", "--json"))

    report = json.loads(run("why", "node", node["id"], "--being", "Aria", "--json"))
    text = run("why", "node", node["id"], "--being", "Aria")

    assert report["tree"]["id"] == node["id"]
    note = next(c for c in report["tree"]["children"] if c["relation"] == "source note")
    assert note["events"][0]["detail"]["idempotency_key"] == "k-1"
    lines = text.splitlines()
    assert lines[0] == f"why node {node['id']} (being Aria)"
    assert lines[1] == f"subject: node {node['id']}"
    assert any(line.startswith("  @") and "MemoryNode.Created" in line for line in lines)
    assert any(line.startswith(f"  source note: note {note['id']}") for line in lines)
    assert any("Note.Noted idempotency_key=k-1" in line for line in lines)
    missing = run("why", "node", str(uuid.uuid4()), "--being", "Aria", code=3)
    assert "not found" in missing
