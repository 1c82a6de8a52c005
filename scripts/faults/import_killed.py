"""Fault: `engram note BEING --file F` killed (SIGKILL) halfway, then run again (#7, item 5).

Imports a file of a few thousand scene lines through the real CLI in a child process, kills it once
about half the lines are written, runs the same command again, and checks that every line is in the
log exactly once and that a third run writes nothing. Prints one `held: …` or `FAILED: …` line per
check; exits 0 only if every check held.

    python scripts/faults/import_killed.py [--lines 3000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

BEING = "Importer"
CLI = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]


def scenes(count: int) -> str:
    """`count` scene lines; every tenth repeats an earlier one word for word (a real diary does)."""
    lines = []
    for i in range(count):
        n = i - 7 if i % 10 == 9 else i
        lines.append(
            json.dumps(
                {
                    "action": f"Walked to the harbour with Mina, day {n}",
                    "actors": ["me", "Mina"],
                    "when": [f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}"],
                    "importance": 0.5,
                }
            )
        )
    return "\n".join(lines) + "\n"


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({"ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_EMBEDDER": "hashing", "ENGRAM_LLM": "none"})
    return env


def _note_count(data_dir: Path) -> int:
    import engram
    from engram.domain.ids import being_id_for_name

    with engram.open(data_dir, embedder="hashing", llm="none", log_level="error") as memory:
        memory.views.ensure(names=["notes"])
        return len(memory.views.read.notes(being_id_for_name(BEING)))


def _import(data_dir: Path, path: Path, *, kill_after: int | None = None) -> tuple[int, str]:
    """Run the import; with `kill_after`, SIGKILL it once its progress shows that many lines read."""
    child = subprocess.Popen(
        [*CLI, "note", BEING, "--file", str(path)],
        env=_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    assert child.stdout is not None
    seen: list[str] = []
    for line in child.stderr:
        seen.append(line)
        if kill_after is not None and _read_so_far(line) >= kill_after:
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=120)
    out = child.stdout.read()
    child.stdout.close()
    child.stderr.close()
    return child.returncode, out + "".join(seen)


def _read_so_far(progress_line: str) -> int:
    # "noting F: read 1500/3000 lines, written …"
    if ": read " not in progress_line:
        return 0
    return int(progress_line.split(": read ", 1)[1].split("/", 1)[0])


def check(workdir: Path, lines: int = 3000) -> list[str]:
    """Run the fault in `workdir`; one `held: …` / `FAILED: …` line per check."""
    data_dir, path = workdir / "data", workdir / "scenes.jsonl"
    path.write_text(scenes(lines), encoding="utf-8")
    subprocess.run([*CLI, "being", "create", BEING], env=_env(data_dir), check=True, capture_output=True)
    results: list[str] = []

    def expect(ok: bool, held: str, failed: str) -> None:
        results.append(f"held: {held}" if ok else f"FAILED: {failed}")

    code, _ = _import(data_dir, path, kill_after=lines // 2)
    after_kill = _note_count(data_dir)
    expect(
        code == -signal.SIGKILL and 0 < after_kill < lines,
        f"the first import was killed with {after_kill} of {lines} lines written",
        f"the kill did not land halfway (exit {code}, {after_kill} of {lines} written)",
    )
    code, out = _import(data_dir, path)
    after_rerun = _note_count(data_dir)
    expect(
        code == 0 and after_rerun == lines,
        f"the re-run completed the import: {after_rerun} notes for {lines} lines",
        f"after the re-run: exit {code}, {after_rerun} notes for {lines} lines\n{out}",
    )
    expect(
        f"{lines - after_kill} written, {after_kill} already there" in out,
        "the re-run wrote only the lines the killed run had not",
        f"the re-run's summary does not say what it skipped:\n{out}",
    )
    code, out = _import(data_dir, path)
    expect(
        code == 0 and _note_count(data_dir) == lines and f"0 written, {lines} already there" in out,
        "a third run wrote nothing",
        f"a third run changed something: exit {code}\n{out}",
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--keep", type=Path, help="Work in this directory and keep it.")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="engram-import-killed-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = check(workdir, args.lines)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    for line in results:
        print(line)
    sys.exit(0 if all(r.startswith("held:") for r in results) else 1)


if __name__ == "__main__":
    main()
