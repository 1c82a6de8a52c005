"""`engram bench compare`: its own logic, against fake checkouts whose `engram` prints fixed JSON.

A real comparison builds two checkouts with virtualenvs (minutes), so the checkouts here are folders
with a `.venv/bin/engram` script that records how it was called and prints a result per call.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bench.compare import figures, merge
from engram.adapters.cli import bench_cmds
from engram.adapters.cli.bench_cmds import NOT_IN_A_CHECKOUT, load_bench, repository_root
from engram.adapters.cli.main import cli
from tests.support import ROOT

# Each call prints the next result of RESULTS (a list of JSON values, one per call) and appends its
# arguments and folder to CALLS; the checkout's name says which side it is.
FAKE_ENGRAM = """#!{python}
import json, os, sys
from pathlib import Path
here = Path(__file__).resolve().parents[2]
calls = here.parent / "calls.jsonl"
with calls.open("a") as fh:
    fh.write(json.dumps({{"side": here.name, "argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
results = json.loads((here / "results.json").read_text())
done = sum(1 for line in calls.read_text().splitlines() if json.loads(line)["side"] == here.name)
print("progress goes to stderr", file=sys.stderr)
print(json.dumps(results[done - 1]))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def recall_result(p50: float, mean: float, hits: float) -> dict[str, object]:
    """The shape of `engram bench recall --json`: rows told apart by their words, per size."""
    return {
        "machine": {"cpus": 2, "date": "2026-11-25", "load_average": [0.5, 0.4, 0.3]},
        "reports": [
            {
                "size": 300,
                "hits_per_recall": hits,
                "rows": [
                    {"size": 300, "index": "exact", "what": "recall, vector given", "p50_ms": p50},
                    {"size": 300, "index": "exact", "what": "query k=10, vector given", "p50_ms": mean},
                ],
                "runs": [1.0, 2.0, 3.0],
            }
        ],
    }


def checkout(root: Path, name: str, results: list[object]) -> Path:
    folder = root / name
    engram = folder / ".venv" / "bin" / "engram"
    engram.parent.mkdir(parents=True)
    engram.write_text(FAKE_ENGRAM.format(python=sys.executable), encoding="utf-8")
    engram.chmod(engram.stat().st_mode | stat.S_IXUSR)
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


def calls(root: Path) -> list[dict[str, object]]:
    lines = (root / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_compare_alternates_the_checkouts_and_prints_medians_and_ratios(tmp_path: Path) -> None:
    old = checkout(
        tmp_path, "old", [recall_result(p, 20.0, h) for p, h in ((10.0, 3), (30.0, 4), (12.0, 3.5))]
    )
    new = checkout(tmp_path, "new", [recall_result(p, 10.0, 3) for p in (5.0, 6.0, 40.0)])
    args = ["bench", "compare", "--old", str(old), "--new", str(new), "recall", "--", "--sizes", "300"]
    outcome = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output

    made = calls(tmp_path)
    assert [c["side"] for c in made] == ["old", "new"] * 3
    assert {c["cwd"] for c in made if c["side"] == "new"} == {str(new.resolve())}
    # An argparse benchmark takes its options after `--`, and prints JSON with `--json`.
    assert all(c["argv"] == ["bench", "recall", "--", "--sizes", "300", "--json"] for c in made)

    lines = {line.split("  ")[0]: line.split() for line in outcome.stdout.splitlines()}
    header = next(line for line in outcome.stdout.splitlines() if line.startswith("figure"))
    assert header.split()[-3:] == ["old", "new", "new/old"]
    # Medians: old 10, 30, 12 → 12; new 5, 6, 40 → 6; ratio 0.5.
    row = lines["reports[size=300].rows[exact / recall, vector given].p50_ms"]
    assert row[-3:] == ["12", "6", "0.50"]
    assert lines["reports[size=300].rows[exact / query k=10, vector given].p50_ms"][-3:] == [
        "20",
        "10",
        "0.50",
    ]
    assert lines["reports[size=300].hits_per_recall"][-3:] == ["3.5", "3", "0.86"]
    # The sizes and counts, the same in every run, are left out of the table.
    assert "reports[size=300].size" not in lines
    assert "reports[size=300].rows[exact / recall, vector given].size" not in lines
    assert outcome.stdout.splitlines()[-1].startswith("(3 whole numbers the same in every run left out")
    # What describes the run (machine, samples) is not a figure.
    assert not any(name.startswith("machine") or ".runs" in name for name in lines)


def test_compare_as_json_keeps_a_figure_only_one_side_reports(tmp_path: Path) -> None:
    old = checkout(tmp_path, "old", [{"single_notes_per_s": 100.0, "ratio": 4}])
    new = checkout(tmp_path, "new", [{"single_notes_per_s": 150.0, "batched_notes_per_s": 900.0, "ratio": 6}])
    args = ["bench", "compare", "--rounds", "1", "--json", "--old", str(old), "--new", str(new), "ingest"]
    outcome = CliRunner().invoke(cli, [*args, "--singles", "10"], catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    # `ingest` has its own options: no `--` before them.
    assert [c["argv"] for c in calls(tmp_path)] == [["bench", "ingest", "--singles", "10", "--json"]] * 2
    result = json.loads(outcome.stdout)
    assert result["rounds"] == 1
    assert result["figures"] == [
        {"figure": "single_notes_per_s", "old": 100.0, "new": 150.0, "ratio": 1.5, "steady": False},
        {"figure": "ratio", "old": 4.0, "new": 6.0, "ratio": 1.5, "steady": False},
        {"figure": "batched_notes_per_s", "old": None, "new": 900.0, "ratio": None, "steady": False},
    ]


def test_a_failing_run_or_a_checkout_without_venv_is_a_clear_error(tmp_path: Path) -> None:
    old = checkout(tmp_path, "old", [{"x": 1}])
    bare = tmp_path / "bare"
    bare.mkdir()
    outcome = CliRunner().invoke(cli, ["bench", "compare", "--old", str(old), "--new", str(bare), "lag"])
    assert outcome.exit_code == 1
    assert "has no .venv/bin/engram" in outcome.output

    new = checkout(tmp_path, "new", [{"x": 2}])
    outcome = CliRunner(env={"FAKE_EXIT": "3"}).invoke(
        cli, ["bench", "compare", "--old", str(old), "--new", str(new), "lag"]
    )
    assert outcome.exit_code == 1
    assert "exited with 3" in outcome.output


def test_figures_name_list_entries_by_their_words_or_count() -> None:
    result = {
        "meta": {"cpus": 2},
        "sizes": [{"nodes": 200, "build_s": 1.5}, {"nodes": 400, "build_s": 3.0}],
        "views": [{"view": "memory", "events_per_s": 10}, {"view": "vectors", "events_per_s": 20}],
        "twins": [{"k": 1, "v": 1.0}, {"k": 1, "v": 2.0}],
        "flag": True,
        "missing": None,
    }
    assert figures(result) == {
        "sizes[nodes=200].nodes": 200.0,
        "sizes[nodes=200].build_s": 1.5,
        "sizes[nodes=400].nodes": 400.0,
        "sizes[nodes=400].build_s": 3.0,
        "views[memory].events_per_s": 10.0,
        "views[vectors].events_per_s": 20.0,
        "twins[0: k=1].k": 1.0,
        "twins[0: k=1].v": 1.0,
        "twins[1: k=1].k": 1.0,
        "twins[1: k=1].v": 2.0,
    }
    [row] = merge([{"a": 2.0}, {"a": 4.0}], [{"a": 0.0}])
    assert (row.old, row.new, row.ratio) == (3.0, 0.0, 0.0)
    [row] = merge([{"a": 0.0}], [{"a": 1.0}])
    assert row.ratio is None


def test_without_a_checkout_engram_bench_says_where_the_benchmarks_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(click.exceptions.Exit) as stopped:
        load_bench(tmp_path)  # an installed package: no bench/ beside it
    assert stopped.value.exit_code == 2
    assert capsys.readouterr().err.strip() == NOT_IN_A_CHECKOUT
    assert load_bench(ROOT).__file__ == str(ROOT / "bench" / "__init__.py")
    assert repository_root() == ROOT

    monkeypatch.setattr(bench_cmds, "repository_root", lambda: tmp_path)
    outcome = CliRunner().invoke(cli, ["bench", "recall", "--", "--sizes", "300"])
    assert outcome.exit_code == 2
    assert outcome.stderr.strip() == NOT_IN_A_CHECKOUT


def test_python_m_bench_runs_the_bench_commands_from_the_root() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "compare", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("Usage: python -m bench compare [OPTIONS] BENCH [ARGS]...")
