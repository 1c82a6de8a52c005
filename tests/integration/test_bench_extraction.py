"""`engram bench extraction` runs on a tiny input and reports what it measures (no timing is asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import extraction_bench
from bench.page import render_page


def test_the_extraction_benchmark_reports_throughput_and_rejections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "extraction.json"
    monkeypatch.setattr(sys, "argv", ["extraction", "--messages", "40", "--json-out", str(out)])
    extraction_bench.main()
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["messages"] == 40 and result["llm_calls"] == 40 and result["candidates"] == 80
    # The fixed mix: of 80 candidates, 12 ungrounded, 8 with an instruction, 4 oversized.
    assert result["rejected"] == {"instruction": 8, "length": 4, "ungrounded": 12}
    assert result["facts"] == 56 and result["messages_per_s"] > 0
    page = render_page({"extraction-sqlite": result})
    assert "## Fact extraction" in page and "| SQLite | 40 |" in page
