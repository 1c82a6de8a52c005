"""`engram being sleep`, `sleep`, `wake`, `mode`, `dream` as a user drives them (ADR 0060)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
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


def test_a_user_schedules_sleeps_dreams_and_wakes_a_being(run: Any) -> None:
    run("being", "create", "Ada")
    _, out, _ = run("being", "sleep", "Ada", "--start", "22", "--hours", "6", "--cooldown", "30")
    assert out.strip() == "sleep schedule: 22:00 UTC for 6 h, light sleep"
    _, out, _ = run("mode", "Ada")
    assert out.startswith("mode: awake") and "cooldown 30 min" in out and "may sleep at" in out
    _, out, _ = run("sleep", "Ada", "--hours", "1.5", "--deep")
    assert out.startswith("asleep (deep, compacting) until ")
    code, _, err = run("sleep", "Ada", ok=False)
    assert code == 4 and "asleep already" in err
    _, out, _ = run("dream", "Ada", "--ticks", "2", "--json")
    report = json.loads(out)
    assert report["mode"] == "asleep" and report["phase"] == "dreaming" and not report["napped"]
    _, out, _ = run("mode", "Ada", "--json")
    mode = json.loads(out)
    assert mode["phase"] == "dreaming" and mode["depth"] == "deep"
    assert [t["event"] for t in mode["recent"]][-1] == "fell_asleep"
    _, out, _ = run("wake", "Ada", "--reason", "breakfast")
    assert out.startswith("awake; no scheduled sleep before ")
    code, _, err = run("wake", "Ada", ok=False)
    assert code == 4 and "awake already" in err
    _, out, _ = run("being", "sleep", "Ada", "--off")
    assert out.strip() == "sleep schedule off"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["being", "sleep", "Ada", "--start", "24", "--hours", "2"], "start hour"),
        (["being", "sleep", "Ada", "--start", "2", "--hours", "0"], "length in hours"),
        (["being", "sleep", "Ada", "--tick-asleep", "0"], "asleep tick"),
        (["being", "sleep", "Ada"], "give --start and --hours"),
        (["sleep", "Ada", "--hours", "0"], "0"),
        (["dream", "Ada", "--ticks", "0"], "0"),
        (["mode", "Nobody"], "not found"),
    ],
)
def test_bad_input_is_one_clear_line(run: Any, args: list[str], message: str) -> None:
    run("being", "create", "Ada")
    code, _, err = run(*args, ok=False)
    assert code in (2, 3) and message in err and "Traceback" not in err
