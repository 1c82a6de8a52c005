"""`engram bench journal` runs on tiny inputs and reports what docs/benchmarks.md needs. Figures are not
asserted; what the benchmark exists to show is: a full refresh writes every day, an increment only the
days its messages fell on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.page import render_page
from engram.adapters.cli.main import cli


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_journal_bench_smoke(tmp_path: Path, backend: str) -> None:
    args = ["bench", "journal", "--", "--messages", "600", "--increments", "10,200", "--per-day", "100"]
    if backend == "postgres":
        url = os.environ.get("ENGRAM_TEST_DATABASE_URL")
        if not url:
            pytest.skip("ENGRAM_TEST_DATABASE_URL not set")
        args += ["--database-url", url]
    out = tmp_path / "journal.json"
    outcome = CliRunner().invoke(cli, [*args, "--json-out", str(out)], catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["messages"] == 600 and result["days"] == 6
    # 10 new messages open a seventh day; 200 more fill it up and two days after it.
    assert [(s["new"], s["days"]) for s in result["increments"]] == [(10, 1), (200, 3)]
    assert "ms per new message" in outcome.output
    page = render_page({f"journal-{'postgresql' if backend == 'postgres' else 'sqlite'}": result})
    assert "## Journal refresh" in page and "journal refresh at 600 messages" in page
