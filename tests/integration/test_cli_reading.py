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
    # --json shows each node as this recall left it: the plain recall above and this one make 2, the
    # count after this recall's increment (issue #16, item 8)
    assert all(n["reactivation_count"] == 2 for n in data["nodes"])
    again = json.loads(aria("recall", "Aria", "tomatoes in the garden", "--json")[1])
    assert [n["id"] for n in again["nodes"]] == [n["id"] for n in data["nodes"]]
    assert all(n["reactivation_count"] == 3 for n in again["nodes"])
    assert all(
        n["last_activated_at"] > m["last_activated_at"]
        for n, m in zip(again["nodes"], data["nodes"], strict=True)
    )
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
    assert (data["total"], data["reactivated"], data["cursor"]) == (1, 1, None)
    # "basil faucet" reached it once; the result shows the node as this search left it
    assert data["nodes"][0]["reactivation_count"] == 2
    again = json.loads(aria("search", "Aria", "work", "--json")[1])
    assert again["nodes"][0]["reactivation_count"] == 3
    # pages: newest first; the cursor is printed on stderr, its pages reactivate nothing
    before = _log_length(aria)
    _, out, err = aria("search", "Aria", "garden", "--limit", "2")
    assert len(out.strip().splitlines()) == 2 and BASIL in out  # the newest garden scene
    assert "3 memories match; next page: --cursor " in err
    cursor = err.rsplit("--cursor ", 1)[1].strip()
    middle = _log_length(aria)
    assert middle > before
    _, out, err = aria("search", "Aria", "garden", "--limit", "2", "--cursor", cursor)
    assert len(out.strip().splitlines()) == 1 and "tomatoes" in out and err == ""
    assert _log_length(aria) == middle
    code, _, err = aria("search", "Aria", "basil", "--cursor", cursor, ok=False)
    assert code == 2 and "another search" in err
    code, _, err = aria("search", "Aria", "garden", "--limit", "101", ok=False)
    assert code == 2
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
    _, out, _ = aria("note", "Aria", "--kind", "map", "--text", "Greenhouse: behind the house")
    assert out.startswith("noted map ")
    aria("note", "Aria", "--kind", "tool", "--text", "calendar: books appointments")
    _, out, _ = aria("context", "Aria")
    assert "\n\n## Tools you can use\n- calendar: books appointments\n\n## Your map\n- Greenhouse" in out
    assert out.startswith("# Who you are\nCurious, warm, dry humour.")
    assert "[todo] Renew the passport" in out
    assert "# Recent memories" in out and f"— {FAUCET} — (annoyed)" in out
    data = json.loads(aria("context", "Aria", "--json")[1])
    assert data["being"] == "Aria" and data["text"] == out.rstrip("\n")
    # Block 1-B as the prefix pair to start a conversation with, beside the rendered text
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert data["messages"][0]["content"].startswith("# What is on your plate")
    assert "[todo] Renew the passport" in data["messages"][0]["content"]
    assert data["messages"][1]["content"]
    assert (
        data["system_text"].startswith("# Who you are") and "What is on your plate" not in data["system_text"]
    )
    assert len(data["recent_nodes"]) == 4 and data["snapshot"]["unread"][0]["text"] == "Renew the passport"
