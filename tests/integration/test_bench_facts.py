"""`engram bench facts-upsert` with tiny inputs, on both backends: eight writers of one hot key land
every write as a version (none lost, none failed), the batches run, and the page renders them. No
figure of speed is asserted (the machine is shared)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bench.page import render_page
from engram.adapters.cli.main import cli
from tests.support import require_postgres


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_facts_upsert_benchmark_loses_no_version(backend: str) -> None:
    args = [
        "bench",
        "facts-upsert",
        "--",
        "--rounds",
        "3",
        "--facts",
        "1500",
        "--batch-size",
        "500",
        "--json",
    ]
    if backend == "postgres":
        args += ["--database-url", require_postgres()]
    outcome = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout[outcome.stdout.index("{") :])
    hot = result["hot_key"]
    assert (hot["writes_expected"], hot["writes_returned"], hot["final_version"]) == (24, 24, 24)
    assert (hot["versions_lost"], hot["writes_failed"]) == (0, 0)
    assert result["batches"]["facts"] == 1500 and result["batches"]["facts_per_s"] > 0
    page = render_page({f"facts-upsert-{'postgresql' if backend == 'postgres' else backend}": result})
    assert "## Fact upsert" in page and "Goal: 0 versions lost" in page
