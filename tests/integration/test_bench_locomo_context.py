"""`engram bench locomo-context`: a turn embedded with its neighbours in the same session, side by side
with today's `<date> <text>` (docs/recall.md, "Memory side")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench import page_context
from bench.locomo import load
from bench.locomo_context import WINDOWS, Window, context_text, evaluate, neighbours, render
from bench.run_locomo import LocomoOptions, run
from engram.adapters.cli.main import cli
from engram.adapters.embedders import HashingEmbedder
from engram.services.config import Settings
from tests.integration.test_bench_locomo import qa, turn
from tests.integration.test_query_speaker import SAMPLE

# The answer ("Yes! It was amazing.") shares no word with the question; the turn before it does.
SYNTHETIC: list[dict[str, Any]] = [
    {
        "sample_id": "syn-ctx",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("Ada", "D1:1", "My zebra finch sings every morning."),
                turn("Ben", "D1:2", "Did you go to the concert downtown?"),
                turn("Ada", "D1:3", "Yes! It was amazing."),
            ],
            "session_2_date_time": "9:00 am on 1 July, 2023",
            "session_2": [
                turn("Ben", "D2:1", "The bakery sells sourdough on Sundays."),
                turn("Ada", "D2:2", "I adopted a greyhound named Comet."),
            ],
        },
        "qa": [
            qa("concert downtown", ["D1:3"], 1),
            qa("sourdough bakery", ["D2:1"], 4),
        ],
    },
]


@pytest.fixture
def conversations(tmp_path: Path) -> Any:
    path = tmp_path / "syn.json"
    path.write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    return load(path)


def test_the_window_stays_inside_the_session(conversations: Any) -> None:
    turns = conversations[0].turns
    prev, nxt = neighbours(turns, 3, 2, 1)  # D2:1: the session before is not its context
    assert prev == [] and [t.dia_id for t in nxt] == ["D2:2"]
    prev, nxt = neighbours(turns, 2, 2, 1)  # D1:3: two before, nothing after in its session
    assert [t.dia_id for t in prev] == ["D1:2", "D1:1"] and nxt == []


def test_a_contextual_text_is_the_date_then_the_turns_in_order(conversations: Any) -> None:
    turns = conversations[0].turns
    assert context_text(turns, 2, Window("prev1", 1, 0, False)) == (
        "2023-05-08 Did you go to the concert downtown? Yes! It was amazing."
    )
    assert context_text(turns, 2, Window("prev1 names", 1, 0, True)) == (
        "2023-05-08 Ben: Did you go to the concert downtown? Ada: Yes! It was amazing."
    )
    assert context_text(turns, 0, Window("prev1+next1", 1, 1, False)) == (
        "2023-05-08 My zebra finch sings every morning. Did you go to the concert downtown?"
    )


def test_the_turn_before_finds_an_answer_its_own_words_cannot(conversations: Any) -> None:
    report = evaluate(conversations, HashingEmbedder(), [w for w in WINDOWS if w.name == "prev1"])
    variants = report["variants"]
    # Today's vector of "Yes! It was amazing." shares no word with the question: not first.
    today = variants["today: <date> <text>"]["categories"]["1"]["recall"]["1"]
    assert today == 0.0
    assert variants["prev1 as the vector"]["categories"]["1"]["recall"]["1"] == 1.0
    assert variants["turn + prev1, max of cosines"]["categories"]["4"]["recall"]["1"] == 1.0
    assert report["dataset"] == {"conversations": 1, "turns": 5, "questions": 2}
    assert "prev1 as the vector" in render(report)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two small conversations ingested by `engram bench locomo --reuse-data` (hashing vectors)."""
    root = tmp_path_factory.mktemp("context")
    path = root / "sample.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    data = root / "data"
    run(LocomoOptions(path=path, profiles=("default",), reuse_data=data), Settings(embedder="hashing"))
    return path, data


def test_the_full_ranking_over_contextual_vectors_and_its_page_sections(
    ingested: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, data = ingested
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    out = tmp_path / "locomo-context-logic.json"
    cache = tmp_path / "vectors"
    args = ["bench", "locomo-context-logic", "--", str(path), "--reuse-data", str(data)]
    args += ["--window", "prev1", "--cache", str(cache), "--json-out", str(out)]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text(encoding="utf-8"))
    variants = report["variants"]
    assert report["benchmark"] == "locomo-context-logic" and report["dataset"]["questions"] == 4
    hnsw, exact = (
        variants["default, HNSW channel (the data dir)"],
        variants["default, today's vectors (exact cosines)"],
    )
    # Exact cosines over today's vectors rank as the data dir's own vector search does.
    assert exact["overall"] == hnsw["overall"]
    assert "default, turn + prev1, blend 0.5" in variants
    assert set(report["cross_validation"]) == {"syn-a", "syn-b"}
    assert any(cache.iterdir())  # the vectors are kept for the next run
    section = page_context.render({"locomo-context-logic": report})
    assert section is not None and section.startswith("## LoCoMo: contextual vectors in the full ranking")


def test_the_dense_command_writes_a_report_the_page_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    path = tmp_path / "syn.json"
    path.write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    out = tmp_path / "locomo-context.json"
    args = ["bench", "locomo-context", "--", str(path), "--embedder", "hashing", "--out", str(out)]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert len(report["variants"]) == 1 + 3 * len(WINDOWS)
    section = page_context.render({"locomo-context": report})
    assert section is not None and "| prev1 as the vector |" in section
