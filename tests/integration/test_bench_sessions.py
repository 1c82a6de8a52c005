"""`engram bench sessions` runs on tiny inputs and reports what it measures (no timing is asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import sessions_bench
from bench.page import render_page


def test_the_sessions_benchmark_reports_close_and_summary_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sessions.json"
    argv = ["sessions", "--sizes", "4", "25", "--sessions", "2", "--json-out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    sessions_bench.main()
    result = json.loads(out.read_text(encoding="utf-8"))
    small, large = result["runs"]
    assert (small["messages_per_session"], large["messages_per_session"]) == (4, 25)
    for run in (small, large):
        for key in ("close", "summarize", "close_and_summarize", "extract"):
            assert run[key]["sessions"] == 2 and run[key]["p95_ms"] >= run[key]["median_ms"] > 0
    assert (small["spines"], large["spines"]) == (0, 2)  # a spine once 20 messages were said
    page = render_page({"sessions": result})
    assert "## Session close and extractive summary" in page and "| 25 | 2 |" in page
