"""`engram bench notes-sweep` runs on tiny inputs and reports what docs/benchmarks.md needs. Figures are
not asserted; what the benchmark exists to show is: every due note expired, found through the
`notes_due` index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.page import render_page
from engram.adapters.cli.main import cli


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_notes_sweep_bench_smoke(tmp_path: Path, backend: str) -> None:
    args = ["bench", "notes-sweep", "--", "--sizes", "300,3000", "--beings", "3"]
    if backend == "postgres":
        url = os.environ.get("ENGRAM_TEST_DATABASE_URL")
        if not url:
            pytest.skip("ENGRAM_TEST_DATABASE_URL not set")
        args += ["--database-url", url]
    out = tmp_path / "notes-sweep.json"
    outcome = CliRunner().invoke(cli, [*args, "--json-out", str(out)], catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(out.read_text(encoding="utf-8"))
    assert [(r["notes"], r["due"], r["found"], r["expired"]) for r in result["sizes"]] == [
        (300, 3, 3, 3),
        (3000, 30, 30, 30),
    ]
    assert all("due" in r["plan"] for r in result["sizes"]), result["sizes"]
    assert set(result["ratio"]) == {"sizes", "sweep", "per_note", "find_due_per_note"}
    assert "µs per note expired" in outcome.output
    page = render_page({f"notes-sweep-{'postgresql' if backend == 'postgres' else 'sqlite'}": result})
    assert "## Notes expiry sweep" in page and "per note expired" in page
