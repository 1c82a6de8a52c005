"""Every `engram bench` command runs on tiny inputs and its result renders into the benchmarks page.

Not a timed test: figures are not asserted, only that each benchmark completes, reports what the
page needs, and that the invariants a benchmark exists to show hold (a rebuild calls no embedder
or LLM; the page states each goal as met or missed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.machine import finish
from bench.page import load_results, render_page
from engram.adapters.cli.main import cli

# `bench all --quick` runs every benchmark in one fixture: minutes on a loaded 2-core machine, so it
# gets a longer guard against hangs than the suite's 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    args = ["bench", "all", "--quick", "--out", str(out), "--page", str(out / "page.md")]
    url = os.environ.get("ENGRAM_TEST_DATABASE_URL")
    if url:
        args += ["--database-url", url]
    outcome = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    return out


def read(results: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    return data


def test_every_benchmark_wrote_its_result(results: Path) -> None:
    expected = {
        "event-size",
        "ingest-sqlite",
        "vectors",
        "rebuild-sqlite",
        "lag-sqlite",
        "patrol",
        "patrol-fixed",
        "recall",
        "http",
        "cli",
        "memory",
        "notes-sweep-sqlite",
        "notes-sqlite",
        "sessions",
        "messages-sqlite",
        "facts-upsert-sqlite",
        "extraction-sqlite",
        "fact-search-sqlite",
        "dreaming",  # ADR 0062
        "embeddings-migrate-sqlite",  # ADR 0071
        "audit-log-sqlite",  # ADRs 0069, 0070
        "erasure-sqlite",  # ADR 0077
        "erasure-items-sqlite",  # ADR 0089
        "keys-seal-sqlite",  # ADR 0095
        "ui-sqlite",  # issue #14
    }
    if os.environ.get("ENGRAM_TEST_DATABASE_URL"):
        expected |= {
            "ingest-postgresql",
            "rebuild-postgresql",
            "lag-postgresql",
            "notes-sweep-postgresql",
            "notes-postgresql",
            "messages-postgresql",
            "facts-upsert-postgresql",
            "extraction-postgresql",
            "fact-search-postgresql",
            "embeddings-migrate-postgresql",
            "audit-log-postgresql",
            "erasure-postgresql",
            "erasure-items-postgresql",
            "keys-seal-postgresql",
            "ui-postgresql",
        }
    assert expected <= set(load_results(results))
    assert not list(results.glob("*.part"))


def test_rebuilds_call_no_embedder_and_no_llm(results: Path) -> None:
    for name in ("rebuild-sqlite", "rebuild-postgresql"):
        if not (results / f"{name}.json").exists():
            continue
        r = read(results, name)
        assert r["external_calls_during_rebuilds"] == {"embedder": 0, "llm": 0}
        assert r["totals"]["sql"]["events_per_s"] > 0


def test_the_memory_benchmark_attributes_rss_and_disk(results: Path) -> None:
    [entry] = read(results, "memory")["sizes"]
    engram = entry["engram"]
    assert engram["memory"]["rss"] > engram["rss_embedder_alone"] > 50 * 1024 * 1024
    assert sum(v["rss"] for v in engram["memory"]["by_mapping"].values()) > engram["memory"]["rss"] // 2
    components = engram["disk"]["components"]
    assert components["event log"]["allocated"] > 0 and components["view memory"]["allocated"] > 0
    assert any(name.startswith("edge nodes: segment") for name in components)
    assert engram["disk"]["total"] == sum(v["allocated"] for v in components.values())


def test_results_carry_the_machine_and_the_load(results: Path) -> None:
    for name, r in load_results(results).items():
        machine = r.get("machine") or r.get("meta")
        assert machine, name
        assert machine.get("cpus") and machine.get("date"), name


def test_the_page_has_a_section_per_benchmark_and_states_the_goals(results: Path) -> None:
    page = (results / "page.md").read_text(encoding="utf-8")
    for heading in (
        "## Vectors in the event log",
        "## Ingest",
        "## Vector search",
        "## Rebuild",
        "## Projection lag under load",
        "## Patrol",
        "## Recall and query latency",
        "## HTTP overhead",
        "## One-shot reads through the CLI",
        "## Memory and disk",
        "## Session close and extractive summary",
        "## Context pack and notes list",
        "## Fact upsert",
        "## Dreaming",
        "## Hash chain, verify, export and import",
        "## Memory explorer pages",
        "## What the figures mean for a deployment",
    ):
        assert heading in page
    assert "Not in this run: locomo." in page
    rebuild = read(results, "rebuild-sqlite")["totals"]["sql"]["events_per_s"]
    assert ("**met**" if rebuild >= 20_000 else "**missed**") in page.split("## Rebuild")[1].split("##")[0]
    assert render_page(load_results(results)) == page
    # The goals read this run; the record of earlier runs on other machines follows them, before the sections.
    goals = page.split("## Goals")[1].split("\n## ")[0]
    assert "### The latency goals on earlier runs" in goals


def test_the_committed_page_is_rendered_from_the_committed_results() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    page = (docs / "benchmarks.md").read_text(encoding="utf-8")
    assert render_page(load_results(docs / "bench" / "results")) == page


def test_the_cli_benchmark_times_each_read_in_a_process_of_its_own(tmp_path: Path) -> None:
    from bench.cli_bench import COMMANDS, measure

    engram = Path(sys.executable).with_name("engram")
    result = measure([engram], 1, tmp_path)
    assert {(r["engram"], r["command"]) for r in result["results"]} == {(str(engram), c) for c in COMMANDS}
    for row in result["results"]:
        assert row["runs"] == 1 and row["wall_s"]["median"] > 0 and row["vs_first"] == 1.0
    assert (tmp_path / "data-0" / "events.sqlite3").exists()  # the demo's data, read by the commands
    finish(result, None)  # the machine, as `engram bench cli` stamps it
    page = render_page({"cli": result})
    assert "One-shot reads through the CLI" in page and "| recall |" in page
