"""Wall time of one-shot reads through the `engram` command line, on the embedded default.

    engram bench cli [--runs 10] [--engram PATH …] [--json] [--json-out FILE]

For each executable (default: the `engram` beside this interpreter; several `--engram` compare
checkouts side by side in one run), makes a data directory of its own with `engram demo` (30 scenes,
patrolled, offline MiniLM, no key), then runs `engram recall Aria "…"` and `engram query Aria "…"
--no-reactivate` `--runs` times each, alternating between the executables so that both meet the same
machine, and prints the median, min and max wall time and the median CPU (user + system) of each
command, and each executable's median against the first's. Each run is a new process, as a user's
shell starts one: the figure includes the interpreter, the imports, loading the model and opening
the stores. No server runs (ADR 0036: the command owns the vector index itself).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import finish, machine_info

COMMANDS: dict[str, list[str]] = {
    "recall": ["recall", "Aria", "river with Lena"],
    "query": ["query", "Aria", "what went wrong in the Atlas cutover?", "--k", "5", "--no-reactivate"],
}


def _run(engram: Path, args: list[str], data_dir: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `engram ARGS` process; fails loudly if the command fails."""
    env = {**os.environ, "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_LOG_LEVEL": "warning"}
    env.pop("ENGRAM_EMBEDDER", None)  # the embedded default: the offline model
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 (an executable the user named, our arguments)
        [str(engram), *args], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{engram} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(engrams: list[Path], runs: int, root: Path) -> dict[str, Any]:
    data_dirs = {}
    for n, engram in enumerate(engrams):
        data_dirs[engram] = root / f"data-{n}"
        _run(engram, ["demo"], data_dirs[engram])
    samples: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    for _ in range(runs):
        for name, args in COMMANDS.items():
            for engram in engrams:
                samples.setdefault((engram, name), []).append(_run(engram, args, data_dirs[engram]))
    rows: list[dict[str, Any]] = []
    for (engram, name), pairs in samples.items():
        walls = [w for w, _ in pairs]
        rows.append(
            {
                "engram": str(engram),
                "command": name,
                "runs": len(pairs),
                "wall_s": {
                    "median": round(statistics.median(walls), 3),
                    "min": round(min(walls), 3),
                    "max": round(max(walls), 3),
                },
                "cpu_s_median": round(statistics.median(c for _, c in pairs), 3),
            }
        )
    first = {r["command"]: r["wall_s"]["median"] for r in rows if r["engram"] == str(engrams[0])}
    for row in rows:
        row["vs_first"] = round(row["wall_s"]["median"] / first[row["command"]], 3)
    return {"commands": {k: " ".join(v) for k, v in COMMANDS.items()}, "results": rows}


def print_table(result: dict[str, Any]) -> None:
    print(f"# One-shot CLI reads, {result['machine']['summary']}")
    print(f"{'command':<8} {'median s':>9} {'min':>6} {'max':>6} {'cpu s':>6} {'vs 1st':>7}  engram")
    for row in result["results"]:
        wall = row["wall_s"]
        print(
            f"{row['command']:<8} {wall['median']:>9.3f} {wall['min']:>6.3f} {wall['max']:>6.3f} "
            f"{row['cpu_s_median']:>6.3f} {row['vs_first']:>7.3f}  {row['engram']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="processes per command and executable")
    parser.add_argument(
        "--engram",
        type=Path,
        action="append",
        default=None,
        help="an `engram` executable to time (repeat to compare; default: the one beside this Python)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", "--save", dest="json_out", type=Path, default=None)
    args = parser.parse_args()
    engrams = args.engram or [Path(sys.executable).with_name("engram")]
    missing = [str(e) for e in engrams if not e.exists()]
    if missing:
        raise SystemExit(f"no engram executable at {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="engram-cli-bench-") as tmp:
        result: dict[str, Any] = {
            "benchmark": "cli",
            "machine": machine_info(),
            **measure(engrams, args.runs, Path(tmp)),
        }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
