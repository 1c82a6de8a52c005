"""The CLI's small gaps (#7, item 15): log --tail/--follow, clusters, nodes, patrol progress."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from tests.patrol_support import topic_scenes

CLI = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {"ENGRAM_DATA_DIR": str(tmp_path / "data"), "ENGRAM_EMBEDDER": "hashing", "ENGRAM_LLM": "none"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def run(*args: str, code: int = 0) -> tuple[str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.stderr
    return result.stdout, result.stderr


@pytest.fixture
def patrolled(env: dict[str, str], tmp_path: Path) -> str:
    """Aria with a few clusters' worth of nodes, some of them dying."""
    run("being", "create", "Aria")
    scenes = [*topic_scenes("baking", 8), *topic_scenes("climbing", 8)]
    path = tmp_path / "scenes.jsonl"
    path.write_text("\n".join(scenes) + "\n", encoding="utf-8")
    run("note", "Aria", "--file", str(path))
    run("patrol", "Aria")
    return "Aria"


def test_clusters_is_a_tree_with_sizes(patrolled: str) -> None:
    roots = json.loads(run("clusters", patrolled, "--json")[0])
    assert [r["name"] for r in roots] == ["Business", "Private"] and all(r["is_root"] for r in roots)
    subclusters = [c for r in roots for c in r["children"]]
    assert subclusters and all(c["total_count"] >= c["active_count"] > 0 for c in subclusters)
    out = run("clusters", patrolled)[0].splitlines()
    child = subclusters[0]
    assert (
        f"  {child['name']}  ({child['active_count']} active / {child['total_count']} nodes)  {child['id']}"
        in out
    )
    assert not any(line.startswith(" ") for line in out if "Business" in line or "Private" in line)
    run("clusters", "Nobody", code=3)


def test_nodes_by_cluster_and_state_reactivate_nothing(patrolled: str) -> None:
    roots = json.loads(run("clusters", patrolled, "--json")[0])
    child = next(c for r in roots for c in r["children"])
    everything = json.loads(run("nodes", patrolled, "--json", "--limit", "1000")[0])
    assert len(everything) == 16
    in_cluster = json.loads(run("nodes", patrolled, "--cluster", child["id"], "--json")[0])
    assert len(in_cluster) == child["total_count"] and {n["cluster_id"] for n in in_cluster} == {child["id"]}
    assert json.loads(run("nodes", patrolled, "--limit", "2", "--json")[0]) == everything[:2]
    active = json.loads(run("nodes", patrolled, "--state", "active", "--json", "--limit", "1000")[0])
    assert active and {n["status"] for n in active} == {"active"}
    assert json.loads(run("nodes", patrolled, "--state", "dead", "--json")[0]) == []
    assert (
        json.loads(run("nodes", patrolled, "--json", "--limit", "1000")[0]) == everything
    )  # nothing reactivated
    _, err = run("nodes", patrolled, "--cluster", "no such cluster", code=3)
    assert "cluster 'no such cluster' not found" in err
    run("nodes", "Nobody", code=3)
    run("nodes", patrolled, "--state", "asleep", code=2)


def test_log_tail(env: dict[str, str]) -> None:
    run("being", "create", "Aria")
    run("being", "create", "Bo")
    run("note", "Aria", "--kind", "todo", "--text", "Renew the passport")
    everything = json.loads(run("log", "--json", "--limit", "1000")[0])
    assert json.loads(run("log", "--tail", "2", "--json")[0]) == everything[-2:]
    arias = [e for e in everything if e["being_id"] == everything[0]["being_id"]]
    assert json.loads(run("log", "--being", "Aria", "--tail", "3", "--json")[0]) == arias[-3:]
    lines = run("log", "--tail", "1")[0].splitlines()
    assert len(lines) == 1 and "Note.Noted" in lines[0]
    run("log", "--tail", "2", "--after", "1", code=2)


def test_log_follow_prints_new_events_and_stops_on_ctrl_c(env: dict[str, str]) -> None:
    run("being", "create", "Aria")
    child_env = {**os.environ, **env, "ENGRAM_WORKER_POLL_INTERVAL_S": "0.05"}
    follower = subprocess.Popen(
        [*CLI, "log", "--follow", "--json"],
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None
    try:
        first = [json.loads(follower.stdout.readline()) for _ in range(3)]  # the being's three events so far
        assert [e["type"] for e in first] == ["Being.Registered", "Cluster.Created", "Cluster.Created"]
        noted = subprocess.run(
            [*CLI, "note", "Aria", "--kind", "todo", "--text", "Water the tomatoes", "--json"],
            env=child_env,
            capture_output=True,
            text=True,
            check=True,
        )
        new = json.loads(follower.stdout.readline())
        assert new["type"] == "Note.Noted" and new["aggregate_id"] == json.loads(noted.stdout)["note_id"]
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert "Traceback" not in (follower.stderr.read() if follower.stderr else "")
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_patrol_shows_its_progress_on_stderr_and_keeps_json_clean(
    env: dict[str, str], tmp_path: Path
) -> None:
    run("being", "create", "Aria")
    path = tmp_path / "scenes.jsonl"
    path.write_text("\n".join(topic_scenes("baking", 5)) + "\n", encoding="utf-8")
    run("note", "Aria", "--file", str(path))
    out, err = run("patrol", "Aria", "--json")
    report = json.loads(out)  # stdout holds the report only
    lines = err.splitlines()
    assert "patrol Aria: notes_to_nodes started, 0 LLM call(s)" in lines
    assert "patrol Aria: notes_to_nodes working, 5/5 items, 0 LLM call(s)" in lines
    assert "patrol Aria: consolidate skipped, 0 LLM call(s)" in lines
    assert lines.index("patrol Aria: diary skipped, 0 LLM call(s)") > lines.index(
        "patrol Aria: merge_small finished, 0 LLM call(s)"
    )
    assert {s["step"] for s in report["steps"]} >= {"notes_to_nodes", "diary"}


def test_patrol_progress_counts_the_llm_calls_as_they_happen(engram) -> None:
    from engram.services.patrol.run import PatrolProgress
    from tests.patrol_support import ScriptedLLM, note_scenes

    engram.beings.register("Aria")
    note_scenes(engram, "Aria", [*topic_scenes("baking", 6), *topic_scenes("climbing", 6)])
    llm = ScriptedLLM()
    seen: list[PatrolProgress] = []
    engram.patrol("Aria", llm=llm, progress=seen.append)
    assert llm.calls, "the scripted LLM was asked"
    assert seen[-1].llm_calls == len(llm.calls)
    calls = [p.llm_calls for p in seen]
    assert calls == sorted(calls) and len(set(calls)) == len(llm.calls) + 1  # one report per call, in order
    steps = [p.step for p in seen if p.state == "started"]
    assert steps[0] == "notes_to_nodes" and steps[-1] == "diary"
    assert PatrolProgress("notes_to_nodes", "working", 0, 12, 0) in seen  # before the first batch
    assert PatrolProgress("notes_to_nodes", "finished", 12, 12, 12) in seen  # one classification per note


def test_with_a_key_set_but_the_llm_turned_off_the_reason_says_so(
    make_settings, clock, capsys: pytest.CaptureFixture[str]
) -> None:
    from structlog.testing import capture_logs

    from engram.services.bootstrap import bootstrap
    from engram.services.patrol.run import BYOK_MISSING, LLM_TURNED_OFF

    with bootstrap(make_settings(openai_api_key="sk-proj-never-used"), clock=clock) as e:
        e.beings.register("Aria")
        with capture_logs() as logs:
            report = e.patrol("Aria")
    skipped = {s["step"]: s.get("reason") for s in report.steps if s["state"] == "skipped"}
    assert skipped == {"consolidate": LLM_TURNED_OFF, "split": LLM_TURNED_OFF, "diary": LLM_TURNED_OFF}
    assert not any(entry["event"] == BYOK_MISSING for entry in logs)
    assert "BYOK" not in LLM_TURNED_OFF and "❹" not in LLM_TURNED_OFF


def test_with_the_llm_turned_off_and_no_key_the_spec_line_is_not_logged(make_settings, clock) -> None:
    """`ENGRAM_LLM=none` is a choice, not a missing key: the spec's "BYOK key not set" line is for the latter."""
    from structlog.testing import capture_logs

    from engram.services.bootstrap import bootstrap
    from engram.services.patrol.run import BYOK_MISSING, LLM_TURNED_OFF

    with bootstrap(make_settings(llm="none", openai_api_key=None, anthropic_api_key=None), clock=clock) as e:
        e.beings.register("Aria")
        with capture_logs() as logs:
            report = e.patrol("Aria")
    assert {s.get("reason") for s in report.steps if s["state"] == "skipped"} == {LLM_TURNED_OFF}
    assert not any(entry["event"] == BYOK_MISSING for entry in logs)
