"""A change of embedder on existing data is noticed and explained at every edge (#7, item 14)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from engram.adapters.cli.main import cli
from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.embedder_check import embedder_mismatch
from tests.patrol_support import topic_scenes

CLI = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
EXPECTED = (
    "the node vectors were made with hashing-384 (ENGRAM_EMBEDDER=hashing), but the configured embedder is "
    "minilm-l6-v2-int8: recall and query cannot find those nodes by meaning. Set the embedder back "
    "(ENGRAM_EMBEDDER=hashing) to find them again"
)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Aria's nodes embedded by the hashing embedder."""
    data = tmp_path / "data"
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data))
    monkeypatch.setenv("ENGRAM_LLM", "none")
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()
    path = tmp_path / "scenes.jsonl"
    path.write_text("\n".join(topic_scenes("baking", 4)) + "\n", encoding="utf-8")
    for args in (["being", "create", "Aria"], ["note", "Aria", "--file", str(path)], ["patrol", "Aria"]):
        assert runner.invoke(cli, args).exit_code == 0
    return data


def test_same_embedder_no_warning(data_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["projections", "status"])
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_the_cli_says_what_changed_and_what_to_do(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "offline")
    runner = CliRunner()
    status = runner.invoke(cli, ["projections", "status"])
    assert status.exit_code == 0 and f"warning: {EXPECTED}" in status.stderr
    recall = runner.invoke(cli, ["recall", "Aria", "baking bread"])
    assert recall.exit_code == 0 and not recall.stdout  # nothing can be found by meaning: hence the warning
    assert f"warning: {EXPECTED}" in recall.stderr
    patrol = runner.invoke(cli, ["patrol", "Aria", "--dry-run"])
    assert f"warning: {EXPECTED}" in patrol.stderr


def test_health_carries_the_warning(data_dir: Path) -> None:
    with (
        bootstrap(Settings(data_dir=data_dir, embedder="offline", llm="none")) as engram,
        TestClient(create_app(engram, settings=HttpSettings(), warm_up=False)) as client,
    ):
        health = client.get("/v1/health").json()
    assert health["status"] == "ok" and len(health["warnings"]) == 1
    assert health["warnings"][0].startswith(EXPECTED)
    with (
        bootstrap(Settings(data_dir=data_dir, embedder="hashing", llm="none")) as engram,
        TestClient(create_app(engram, settings=HttpSettings(), warm_up=False)) as client,
    ):
        assert client.get("/v1/health").json()["warnings"] == []


def test_new_nodes_with_the_new_embedder_leave_the_old_ones_named(data_dir: Path) -> None:
    with bootstrap(Settings(data_dir=data_dir, embedder="offline", llm="none")) as engram:
        engram.notes.take("Aria", NoteInput(text=topic_scenes("climbing", 1)[0]))
        engram.patrol("Aria")
        mismatch = embedder_mismatch(engram)
    assert mismatch is not None and mismatch.configured_has_vectors
    assert mismatch.stored == ("hashing-384",)
    assert mismatch.message().startswith("some of the node vectors were made with hashing-384")


def test_the_worker_logs_it(data_dir: Path) -> None:
    env = {
        **os.environ,
        "ENGRAM_EMBEDDER": "offline",
        "ENGRAM_AUTO_PATROL": "false",
        "ENGRAM_LOG_FORMAT": "json",
    }
    worker = subprocess.Popen([*CLI, "worker"], env=env, stderr=subprocess.PIPE, text=True)
    assert worker.stderr is not None
    try:
        deadline = time.monotonic() + 60
        found = ""
        while time.monotonic() < deadline and not found:
            line = worker.stderr.readline()
            if '"embedder changed"' in line:
                found = line
        assert '"configured": "minilm-l6-v2-int8"' in found and '"stored": ["hashing-384"]' in found
        assert EXPECTED in found
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
