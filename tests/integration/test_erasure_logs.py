"""Logs hold no canary (issue #13's proof): the canary scenario run through the CLI, each command a
process of its own logging at debug level, in both renderers; no log line quotes the planted text —
not while it is noted, recalled, searched, patrolled, messaged, nor when it is forgotten. Logs
cannot be erased afterwards, so they must never hold it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from engram.services.config import Settings
from tests.integration.test_erasure import _files_with
from tests.patrol_support import scene

CLI = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
CANARY = "qzjlogcanarywx"
USER_CANARY = "vwklogusercanq"


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_no_log_line_quotes_the_canary(make_settings: Callable[..., Settings], fmt: str) -> None:
    settings = make_settings()
    env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(settings.data_dir),
        "ENGRAM_EMBEDDER": "hashing",
        "ENGRAM_LLM": "none",
        "ENGRAM_LOG_LEVEL": "debug",
        "ENGRAM_LOG_FORMAT": fmt,
    }
    if settings.database_url is not None:
        env["ENGRAM_DATABASE_URL"] = settings.database_url.get_secret_value()
    logs: list[str] = []

    def run(*args: str) -> str:
        done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        logs.append(done.stderr)
        return done.stdout

    run("being", "create", "Aria")
    noted = run(
        "note", "Aria", "--json", "--scene", scene(f"Walked to the {CANARY} lake", actors=["me", "Lena"])
    )
    note_id = json.loads(noted)["note_id"]
    run("message", "Aria", "--user", "mina", "--id", "m1", "--text", f"my {USER_CANARY} secret")
    run("facts", "add", "Aria", "--subject", "mina", "--text", f"Mina hides the {USER_CANARY} box")
    run("patrol", "Aria")
    assert CANARY in run("recall", "Aria", f"the {CANARY} lake")  # the canary is there, and found
    run("search", "Aria", CANARY)
    run("messages", "search", "Aria", USER_CANARY)
    run("forget", "note", note_id, "--yes")
    run("forget", "subject", "Aria", "--user", "mina", "--yes")
    run("recall", "Aria", f"the {CANARY} lake")  # asked again after forgetting: a query is text too
    run("projections", "rebuild", "--all")

    text = "\n".join(logs)
    assert "forgotten" in text and "command handled" in text  # debug logs were captured
    assert CANARY not in text and USER_CANARY not in text
    log_files = [p for p in settings.data_dir.rglob("*") if p.is_file() and ".log" in p.name]
    assert all(CANARY.encode() not in p.read_bytes() for p in log_files)
    assert _files_with(settings.data_dir, CANARY.encode()) == []
    assert _files_with(settings.data_dir, USER_CANARY.encode()) == []
