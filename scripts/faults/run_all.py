"""Every fault script of issue #7, one after the other, each in a process of its own.

    .venv/bin/python scripts/faults/run_all.py [--database-url URL] [--only NAME ...]

Each script prints its own `held: …` / `FAILED: …` lines; this one adds a line per script and a
summary, and exits 0 only if every script held. With `--database-url`, the scripts that have a
PostgreSQL variant also run on a fresh schema of that database. Which item of issue #7 each
reproduces: `scripts/faults/README.md`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS: dict[str, tuple[str, bool]] = {
    # name: (what it reproduces, whether it takes --database-url)
    "nul_intake": ("1: text no store can keep is refused at intake", True),
    "poison_event": ("1: an event a view cannot apply holds back only its being", True),
    "view_ahead_race": ("2: concurrent reactivating reads; a view really ahead of the log", True),
    "orphan_collections": ("3: a killed rebuild's vector collections are collected", True),
    "import_killed": ("5: a killed file import, run again, writes every line once", False),
    "embedded_processes": ("6: CLI, MCP, serve and worker on one embedded data dir", False),
    "bad_llm_server": ("7: an LLM server that answers badly", False),
    "disk_full": ("10: a full disk", False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database-url", help="also on PostgreSQL (each script makes its own schema)")
    parser.add_argument("--only", choices=list(SCRIPTS), action="append", help="run only these scripts")
    args = parser.parse_args()
    runs: list[tuple[str, list[str]]] = []
    for name in args.only or SCRIPTS:
        runs.append((name, []))
        if args.database_url and SCRIPTS[name][1]:
            runs.append((name, ["--database-url", args.database_url]))
    failed: list[str] = []
    for name, extra in runs:
        label = f"{name}{' (PostgreSQL)' if extra else ''}"
        sys.stdout.write(f"== {label} — item {SCRIPTS[name][0]}\n")
        sys.stdout.flush()
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *extra], check=False)
        took = time.monotonic() - started
        verdict = "held" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
        sys.stdout.write(f"== {label}: {verdict} in {took:.0f} s\n\n")
        if done.returncode != 0:
            failed.append(label)
    sys.stdout.write(
        f"{len(runs) - len(failed)} of {len(runs)} fault scripts held"
        + (f"; failed: {', '.join(failed)}\n" if failed else "\n")
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
