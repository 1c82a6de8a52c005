"""`engram bench compare --old CHECKOUT --new CHECKOUT BENCH [-- ARGS]`: one benchmark, two checkouts.

Each run is `CHECKOUT/.venv/bin/engram bench BENCH … --json` in a fresh process, in the checkout's
own folder and virtualenv, so the old side may be any commit whose `engram bench BENCH` prints JSON
(also one from before `bench/` left the package, or before this command existed). The sides
alternate, old then new, `rounds` times, so that a phase of the machine falls on both. Every
number of a result is a figure, named by its path in the JSON; the table shows the median over the
rounds of each side and the ratio new/old, and leaves out whole numbers the same in every run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# These benchmarks are `engram bench` commands with their own options; the others parse theirs
# with argparse and take them after `--` (adapters/cli/bench_cmds.py).
OWN_OPTIONS = frozenset({"ingest", "locomo"})
# Where a result describes its run, not a figure of it.
NOT_FIGURES = frozenset({"machine", "meta", "date", "setup", "config", "dataset"})

Figures = dict[str, float]
Runner = Callable[[Sequence[str], Path], str]  # command, folder → stdout


class CompareFailed(RuntimeError):
    pass


def bench_command(engram: Path, name: str, args: Sequence[str]) -> list[str]:
    """The command that prints benchmark `name`'s result as JSON."""
    if name in OWN_OPTIONS:
        return [str(engram), "bench", name, *args, "--json"]
    return [str(engram), "bench", name, "--", *args, "--json"]


def engram_of(checkout: Path) -> Path:
    engram = checkout / ".venv" / "bin" / "engram"
    if not engram.is_file():
        raise CompareFailed(
            f"{checkout} has no .venv/bin/engram: create it there with "
            '`python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev]"`'
        )
    return engram


def run_process(command: Sequence[str], folder: Path) -> str:
    """Run one benchmark; its progress (stderr) passes through, its stdout is the result."""
    env = {**os.environ, "ENGRAM_LOG_LEVEL": os.environ.get("ENGRAM_LOG_LEVEL", "warning")}
    env.pop("VIRTUAL_ENV", None)  # the checkout's engram runs in its own virtualenv
    # The command is the checkout's own `engram` with the caller's arguments; no shell.
    proc = subprocess.run(command, cwd=folder, env=env, stdout=subprocess.PIPE, text=True, check=False)  # noqa: S603
    if proc.returncode != 0:
        raise CompareFailed(f"`{' '.join(command)}` in {folder} exited with {proc.returncode}")
    return proc.stdout


def _label(item: dict[str, Any]) -> str:
    """What tells the entries of a list of results apart: their words, else their first count."""
    words = [v for v in item.values() if isinstance(v, str)]
    if words:
        return " / ".join(words)
    return next((f"{k}={v}" for k, v in item.items() if type(v) is int), "")


def figures(result: Any, path: str = "") -> Figures:
    """Every number of a result, named by its path (lists of samples are left out: their median is
    already a figure)."""
    out: Figures = {}
    if isinstance(result, dict):
        for key, value in result.items():
            if path or key not in NOT_FIGURES:
                out.update(figures(value, f"{path}.{key}" if path else str(key)))
    elif isinstance(result, list) and result and all(isinstance(v, dict) for v in result):
        labels = [_label(item) for item in result]
        if len(set(labels)) < len(labels):
            labels = [f"{i}: {label}" if label else str(i) for i, label in enumerate(labels)]
        for label, item in zip(labels, result, strict=True):
            out.update(figures(item, f"{path}[{label}]"))
    elif isinstance(result, int | float) and not isinstance(result, bool):
        out[path] = float(result)
    return out


def parse(stdout: str, where: str) -> Figures:
    try:
        return figures(json.loads(stdout))
    except json.JSONDecodeError as exc:
        raise CompareFailed(f"the benchmark in {where} printed no JSON result ({exc})") from exc


@dataclass(frozen=True)
class Row:
    figure: str
    old: float | None
    new: float | None
    # A whole number the same in every run of both sides (a size, a count of calls): a setting or a
    # count, not a measurement, so the table leaves it out (the JSON keeps it).
    steady: bool = False

    @property
    def ratio(self) -> float | None:
        if self.old is None or self.new is None or self.old == 0:
            return None
        return self.new / self.old


def merge(old: Sequence[Figures], new: Sequence[Figures]) -> list[Row]:
    """Median per figure over each side's runs; a figure only one side reports keeps its place."""

    def median(runs: Sequence[Figures], name: str) -> float | None:
        values = [run[name] for run in runs if name in run]
        return statistics.median(values) if values else None

    def steady(name: str) -> bool:
        values = {run.get(name) for run in (*old, *new)}
        return len(values) == 1 and all(v is not None and v.is_integer() for v in values)

    names = list(dict.fromkeys(name for run in (*old, *new) for name in run))
    return [Row(name, median(old, name), median(new, name), steady(name)) for name in names]


def compare(
    old: Path,
    new: Path,
    name: str,
    args: Sequence[str],
    rounds: int,
    report: Callable[[str], None],
    run: Runner = run_process,
) -> list[Row]:
    sides = {"old": (old, engram_of(old)), "new": (new, engram_of(new))}
    results: dict[str, list[Figures]] = {"old": [], "new": []}
    for i in range(1, rounds + 1):
        for side, (checkout, engram) in sides.items():
            report(f"[{i}/{rounds}] {side}: {checkout}")
            results[side].append(parse(run(bench_command(engram, name, args), checkout), str(checkout)))
    return merge(results["old"], results["new"])


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def render(rows: Sequence[Row], rounds: int) -> str:
    header = f"figure (median of {rounds} run{'s' if rounds != 1 else ''} each)"
    table = [(header, "old", "new", "new/old")]
    for row in rows:
        if row.steady:
            continue
        ratio = row.ratio
        table.append(
            (row.figure, _number(row.old), _number(row.new), "—" if ratio is None else f"{ratio:.2f}")
        )
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = [
        "  ".join([r[0].ljust(widths[0]), *(r[i].rjust(widths[i]) for i in (1, 2, 3))]).rstrip()
        for r in table
    ]
    left_out = sum(row.steady for row in rows)
    if left_out:
        lines.append(
            f"({left_out} whole numbers the same in every run left out: sizes and counts; see --json)"
        )
    return "\n".join(lines) + "\n"


def as_json(rows: Sequence[Row], rounds: int) -> dict[str, Any]:
    return {
        "rounds": rounds,
        "figures": [
            {"figure": r.figure, "old": r.old, "new": r.new, "ratio": r.ratio, "steady": r.steady}
            for r in rows
        ],
    }
