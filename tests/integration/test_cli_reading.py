"""`engram recall | recall-cluster | search | query | context` as a user drives them (SQLite, hashing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from tests.patrol_support import scene

BASIL = "Picked basil in the garden for a pesto"
FAUCET = "Fixed the leaking bathroom faucet"
SCENES = [
    scene("Planted tomatoes in the garden with Mina", "2026-05-02", feeling="hopeful", themes=["garden"]),
    scene("Watered the tomato seedlings in the garden", "2026-05-06", feeling="calm", themes=["garden"]),
    scene(BASIL, "2026-07-22", feeling="content", themes=["garden"]),
    scene(FAUCET, "2026-05-04", feeling="annoyed", themes=["work"]),
]

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.stderr
        return result.exit_code, result.stdout, result.stderr

    return invoke


@pytest.fixture
def aria(run: Run, tmp_path: Path) -> Run:
    scenes = tmp_path / "scenes.jsonl"
    scenes.write_text("\n".join(SCENES) + "\n", encoding="utf-8")
    run("being", "create", "Aria", "--soul", "Curious, warm, dry humour.")
    run("note", "Aria", "--file", str(scenes))
    run("note", "Aria", "--kind", "todo", "--text", "Renew the passport")
    run("patrol", "Aria")
    return run


def _log_length(run: Run) -> int:
    return len(json.loads(run("log", "--json", "--limit", "10000")[1]))


def test_recall_prints_the_memory_block_or_nothing(aria: Run) -> None:
    _, out, _ = aria("recall", "Aria", "tomatoes in the garden")
    line = out.strip()
    assert line.startswith("<memory>") and line.endswith("</memory>") and "\n" not in line
    assert "Planted tomatoes in the garden with Mina" in line and "hopeful" in line
    _, out, _ = aria("recall", "Aria", "tomatoes in the garden", "--json")
    data = json.loads(out)
    assert data["text"].startswith("<memory>") and len(data["nodes"]) == 3 and data["position"]
    assert all(n["score"] > 0.2 and n["id"] and n["cluster_id"] for n in data["nodes"])
    code, out, err = aria("recall", "Aria", "xylophone quartz zeppelin")
    assert code == 0 and out == "" and err == ""
    assert json.loads(aria("recall", "Aria", "xylophone", "--json")[1]) == {
        "text": "",
        "nodes": [],
        "position": None,
    }
    code, _, err = aria("recall", "Aria", "  ", ok=False)
    assert code == 2 and "must not be empty" in err
    code, _, err = aria("recall", "Nobody", "tomatoes", ok=False)
    assert code == 3 and "not found" in err


def test_query_prints_ranked_lines_with_scores(aria: Run) -> None:
    before = _log_length(aria)
    _, out, _ = aria("query", "Aria", "basil pesto", "--k", "2", "--no-reactivate")
    lines = out.strip().splitlines()
    assert len(lines) == 2
    rank, score, text = lines[0].split(maxsplit=2)
    assert rank == "1." and float(score) > 0
    assert text.startswith(f"2026-07-22 — {BASIL} — (content)")
    assert float(lines[1].split()[1]) <= float(score)
    assert _log_length(aria) == before  # --no-reactivate writes nothing
    data = json.loads(aria("query", "Aria", "leaking faucet", "--profile", "spec-001", "--json")[1])
    assert data["nodes"][0]["action"] == FAUCET and data["position"] is not None
    assert _log_length(aria) > before
    assert len(json.loads(aria("query", "Aria", "garden", "--k", "1", "--json")[1])["nodes"]) == 1
    code, _, err = aria("query", "Aria", "garden", "--k", "0", ok=False)
    assert code == 2 and "--k" in err
    code, _, err = aria("query", "Aria", "garden", "--profile", "nope", ok=False)
    assert code == 2
    data = json.loads(aria("query", "Aria", "garden", "--include-dead", "--k", "100", "--json")[1])
    assert {n["status"] for n in data["nodes"]} <= {"active", "dying", "dead"} and data["nodes"]


def test_search_and_recall_cluster(aria: Run) -> None:
    _, out, _ = aria("search", "Aria", "garden")
    assert len(out.strip().splitlines()) == 3 and FAUCET not in out
    _, out, _ = aria("search", "Aria", "basil", "faucet")
    assert BASIL in out and FAUCET in out
    code, out, err = aria("search", "Aria", "basil", "faucet", "--mode", "and")
    assert code == 0 and out == "" and "no memory matches" in err
    data = json.loads(aria("search", "Aria", "work", "--json")[1])
    assert [n["action"] for n in data["nodes"]] == [FAUCET]
    # "basil faucet" reached it once; the result shows the node as it was before this search
    assert data["nodes"][0]["reactivation_count"] == 1
    again = json.loads(aria("search", "Aria", "work", "--json")[1])
    assert again["nodes"][0]["reactivation_count"] == 2
    cluster = data["nodes"][0]["cluster_id"]
    _, out, _ = aria("recall-cluster", "Aria", cluster)
    assert FAUCET in out and cluster not in out
    members = json.loads(aria("recall-cluster", "Aria", cluster, "--json")[1])["nodes"]
    assert FAUCET in {n["action"] for n in members}
    assert all(n["cluster_id"] == cluster for n in members)
    code, _, err = aria("recall-cluster", "Aria", "00000000-0000-0000-0000-000000000001", ok=False)
    assert code == 3 and "not found" in err
    code, _, _ = aria("recall-cluster", "Aria", "not-a-uuid", ok=False)
    assert code == 2
    code, _, _ = aria("search", "Aria", ok=False)
    assert code == 2


def test_context_prints_the_ready_text(aria: Run) -> None:
    _, out, _ = aria("context", "Aria")
    assert out.startswith("# Who you are\nCurious, warm, dry humour.")
    assert "[todo] Renew the passport" in out
    assert "# Recent memories" in out and f"— {FAUCET} — (annoyed)" in out
    data = json.loads(aria("context", "Aria", "--json")[1])
    assert data["being"] == "Aria" and data["text"] == out.rstrip("\n")
    assert len(data["recent_nodes"]) == 4 and data["snapshot"]["unread"][0]["text"] == "Renew the passport"
