"""Moving a deployment to the opt-in e5-small embedder (ADR 0080) with `engram embeddings migrate`
(ADR 0071): the target is accepted, the output names the setting, and queries then find by meaning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from tests.patrol_support import topic_scenes


def test_hashing_to_e5_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_LLM", "none")
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()
    path = tmp_path / "scenes.jsonl"
    path.write_text("\n".join(topic_scenes("baking", 3)) + "\n", encoding="utf-8")
    for args in (["being", "create", "Aria"], ["note", "Aria", "--file", str(path)], ["patrol", "Aria"]):
        assert runner.invoke(cli, args).exit_code == 0

    done = runner.invoke(cli, ["embeddings", "migrate", "--to", "e5-small", "--yes"])
    assert done.exit_code == 0, done.output
    assert "re-embedded 3 nodes" in done.stdout and "ENGRAM_EMBEDDER=e5-small" in done.stdout

    monkeypatch.setenv("ENGRAM_EMBEDDER", "e5-small")
    found = runner.invoke(cli, ["query", "Aria", "bread in the oven", "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["nodes"]
    status = runner.invoke(cli, ["projections", "status"])
    assert status.exit_code == 0 and "warning" not in status.stderr
