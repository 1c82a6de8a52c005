"""Log lines on stderr stay whole when Engram's threads and a library's logger write at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A child process, so that its stderr is a real file as in `engram serve 2> serve.log`.
CHILD = textwrap.dedent(
    """
    import logging, sys, threading
    import structlog
    from engram.adapters.logging import configure_logging

    configure_logging("info", sys.argv[1], library_loggers=("uvicorn",))
    logging.getLogger("uvicorn.error").setLevel(logging.INFO)  # as uvicorn.run(log_level="info") does
    log = structlog.get_logger()
    start = threading.Barrier(8)

    def engram_lines(n: int) -> None:
        start.wait()
        for i in range(400):
            log.info("projection lock acquired", projection=f"p{n}", i=i)

    def uvicorn_lines() -> None:
        start.wait()
        for i in range(400):
            logging.getLogger("uvicorn.error").info("Started server process [%d]", i)

    threads = [threading.Thread(target=engram_lines, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=uvicorn_lines) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logging.getLogger("unrelated.library").warning("not routed")
    """
)


def run_child(tmp_path: Path, fmt: str) -> list[str]:
    err = tmp_path / "serve.log"
    with err.open("w", encoding="utf-8") as stderr:
        subprocess.run([sys.executable, "-c", CHILD, fmt], stderr=stderr, check=True, timeout=120)
    return err.read_text(encoding="utf-8").splitlines()


def test_every_json_line_is_whole_while_threads_and_uvicorn_log_at_once(tmp_path: Path) -> None:
    lines = run_child(tmp_path, "json")
    records = [json.loads(line) for line in lines if line.strip() and "not routed" not in line]
    ours = [r for r in records if r["event"] == "projection lock acquired"]
    theirs = [r for r in records if r["event"].startswith("Started server process")]
    assert len(ours) == 4 * 400 and len(theirs) == 4 * 400
    assert {r["logger"] for r in theirs} == {"uvicorn.error"}
    assert all(r["level"] == "info" and r["timestamp"].endswith("Z") for r in theirs)
    # Only the loggers named are routed: the root logger (an embedding application's) is untouched.
    assert not any(r.get("logger") == "unrelated.library" for r in records)


@pytest.mark.parametrize("fmt", ["console"])
def test_console_lines_are_whole_too(tmp_path: Path, fmt: str) -> None:
    lines = [line for line in run_child(tmp_path, fmt) if line.strip()]
    ours = [line for line in lines if "projection lock acquired" in line]
    theirs = [line for line in lines if "Started server process" in line]
    assert len(ours) == 1600 and len(theirs) == 1600
    assert not [line for line in lines if "projection lock acquired" in line and "Started server" in line]
