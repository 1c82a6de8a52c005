"""`engram bench notes` runs on tiny inputs and reports what it measures (no timing is asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import notes_pack


def test_the_notes_benchmark_reports_pack_list_and_query_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "notes.json"
    argv = ["notes", "--sizes", "120", "--query-sizes", "120", "--calls", "3", "--json-out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    notes_pack.main()
    result = json.loads(out.read_text(encoding="utf-8"))
    [run] = result["runs"]
    assert run["notes"] == 120
    for key in ("pack", "list", "pack_query"):
        assert run[key]["calls"] >= 3 and run[key]["p95_ms"] >= run[key]["p50_ms"] > 0
    # 5% sensitive and 5% expired never enter the pack: the 20 most recent live notes do.
    assert run["pack"]["notes_returned"] == 20
    assert result["machine"]["cpus"]
