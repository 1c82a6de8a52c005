"""`engram bench messages` on a tiny history, on both backends: it takes every message, splits the
intake's time into parts that add up to it, times each view's catch-up, and renders on the page.
No figure is asserted (the machine is shared)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bench.page import render_page
from engram.adapters.cli.main import cli
from tests.support import require_postgres


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_messages_benchmark_reports_where_the_time_goes(backend: str) -> None:
    args = ["bench", "messages", "--", "--messages", "240", "--users", "3", "--json"]
    if backend == "postgres":
        args += ["--database-url", require_postgres()]
    outcome = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout[outcome.stdout.index("{") :])
    assert result["messages"] == 240 and result["meta"]["backend"] == backend
    # 3 users, 80 messages each, a pause every 40: two sessions each.
    assert result["sessions"] == 6
    # the being and its two root clusters; each message and its Heard; Started, opened, closed.
    assert result["events"] == 3 + 240 * 2 + 3 + 6 + 3
    parts = result["parts_s"]
    assert set(parts) == {
        "parse + validate lines",
        "aggregate loads",
        "event encoding",
        "insert + commit",
        "domain + batching (the rest)",
    }
    assert all(seconds >= 0 for seconds in parts.values()), parts
    assert abs(sum(parts.values()) - result["intake_s"]) < 0.05
    assert set(result["views_s"]) == {"conversations", "message_search"}
    page = render_page({f"messages-{'postgresql' if backend == 'postgres' else 'sqlite'}": result})
    assert "## Message intake" in page and "message intake, batched import of 240 messages" in page
