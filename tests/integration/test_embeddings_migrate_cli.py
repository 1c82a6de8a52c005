"""`engram embeddings migrate` from the command line (#13, ADR 0071): hashing → offline (MiniLM) on a
data directory, with the dry run, the refusal without --yes off a terminal, bad targets, the switch,
and the mismatch warning of #7 gone, the log's live model embedding the queries (ADR 0079)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from tests.patrol_support import topic_scenes


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Aria's 4 nodes and 1 note embedded by the hashing embedder."""
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


def test_dry_run_then_refused_without_yes_then_migrated(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    dry = runner.invoke(cli, ["embeddings", "migrate", "--to", "offline", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["to_model"] == "minilm-l6-v2-int8" and plan["pending"]["node"] == 4
    assert plan["estimate_s"] is not None and not plan["switched"]

    head = runner.invoke(cli, ["log", "--json"]).stdout.count("\n")
    assert head > 0
    refused = runner.invoke(cli, ["embeddings", "migrate", "--to", "offline"], input="")
    assert refused.exit_code != 0 and "--yes" in refused.output
    assert runner.invoke(cli, ["log", "--json"]).stdout.count("\n") == head  # nothing written

    done = runner.invoke(cli, ["embeddings", "migrate", "--to", "offline", "--yes"])
    assert done.exit_code == 0, done.output
    assert "re-embedded 4 nodes" in done.stdout and "dropped the collections of hashing-384" in done.stdout
    assert "ENGRAM_EMBEDDER=offline" in done.stdout

    # The configuration still names the old model: the log's live one embeds the query (ADR 0079),
    # so recall finds by meaning, without the mismatch warning of #7.
    stale = runner.invoke(cli, ["recall", "Aria", "Baked rye sourdough loaves in the kitchen oven"])
    assert stale.exit_code == 0 and stale.stdout.strip(), stale.output
    assert "cannot find those nodes by meaning" not in stale.stderr
    assert "the configured embedder (hashing-384) is ignored" in stale.stderr

    # With the embedder configured as the output says: no warning, and recall finds by meaning.
    monkeypatch.setenv("ENGRAM_EMBEDDER", "offline")
    status = runner.invoke(cli, ["projections", "status"])
    assert status.exit_code == 0 and "warning" not in status.stderr
    recall = runner.invoke(cli, ["recall", "Aria", "Baked rye sourdough loaves in the kitchen oven"])
    assert recall.exit_code == 0 and recall.stdout.strip() and "warning" not in recall.stderr
    again = runner.invoke(cli, ["embeddings", "migrate", "--to", "offline", "--yes"])
    assert again.exit_code == 0 and "nothing to do" in again.stdout


def test_the_warning_names_the_migration(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "offline")
    status = CliRunner().invoke(cli, ["projections", "status"])
    assert "engram embeddings migrate --to offline" in status.stderr


@pytest.mark.parametrize(("target", "says"), [("bogus", "unknown embedding model"), ("hashing:x", "number")])
def test_bad_targets_are_refused(data_dir: Path, target: str, says: str) -> None:
    result = CliRunner().invoke(cli, ["embeddings", "migrate", "--to", target, "--yes"])
    assert result.exit_code != 0 and says in result.stderr


def test_to_the_opt_in_e5_small(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The multilingual offline model (ADR 0080) is a target; the output names its setting."""
    runner = CliRunner()
    done = runner.invoke(cli, ["embeddings", "migrate", "--to", "e5-small", "--yes"])
    assert done.exit_code == 0, done.output
    assert "re-embedded 4 nodes" in done.stdout and "ENGRAM_EMBEDDER=e5-small" in done.stdout

    monkeypatch.setenv("ENGRAM_EMBEDDER", "e5-small")
    found = runner.invoke(cli, ["query", "Aria", "bread in the oven", "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["nodes"]
    status = runner.invoke(cli, ["projections", "status"])
    assert status.exit_code == 0 and "warning" not in status.stderr
