"""`engram bench locomo-models`: embedders side by side on LoCoMo-format data, and its vector cache."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.embedding_cache import CachedEmbedder
from bench.locomo import load
from bench.locomo_models import Candidate, evaluate, interval95, per_conversation, render, turn_text
from engram.adapters.embedders import HashingEmbedder
from engram.domain.embedding import Embedding
from tests.integration.test_bench_locomo import qa, turn

SYNTHETIC: list[dict[str, Any]] = [
    {
        "sample_id": "syn-a",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("Ada", "D1:1", "I adopted a greyhound named Comet last spring."),
                turn("Ben", "D1:2", "My zebra finch sings every morning."),
                turn("Ada", "D1:3", "The orchestra rehearsal ran late again."),
            ],
        },
        "qa": [
            qa("zebra finch sings", ["D1:2"], 4),
            qa("orchestra rehearsal", ["D1:3"], 1),
        ],
    },
    {
        "sample_id": "syn-b",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "9:00 am on 1 July, 2023",
            "session_1": [
                turn("Cy", "D1:1", "We sailed a catamaran around the lagoon."),
                turn("Di", "D1:2", "The bakery sells sourdough on Sundays."),
            ],
        },
        "qa": [qa("sourdough bakery", ["D1:2"], 2)],
    },
]


@pytest.fixture
def conversations(tmp_path: Path) -> Any:
    path = tmp_path / "syn.json"
    path.write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    return load(path)


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_a_turn_is_embedded_as_a_node_embeds_it(conversations: Any) -> None:
    assert turn_text(conversations[0].turns[0]) == "2023-05-08 I adopted a greyhound named Comet last spring."


def test_each_question_ranks_its_own_conversation_and_is_scored(conversations: Any, tmp_path: Path) -> None:
    report = evaluate(conversations, [Candidate("hashing", HashingEmbedder())], cache=tmp_path / "cache")
    result = report["embedders"]["hashing"]
    assert report["dataset"] == {"conversations": 2, "turns": 5, "questions": 3}
    # Lexical vectors: each question's words are in its evidence turn only, so it comes first.
    assert result["overall"]["recall"]["1"] == 1.0
    assert result["overall"]["questions"] == 3
    assert set(result["categories"]) == {"1", "2", "4"}
    assert set(result["conversations"]) == {"syn-a", "syn-b"}
    assert result["conversations"]["syn-a"]["questions"] == 2
    assert result["embed"]["texts"] == 5
    assert result["embed"]["texts_per_s"] > 0
    assert "hashing (hashing-384)" in render(report)


def test_the_cache_answers_a_second_run_without_the_model(tmp_path: Path) -> None:
    first = CachedEmbedder(Counting(), tmp_path)
    vectors = first.embed(["a greyhound", "a finch", "a greyhound"])
    assert first.misses == 2  # a text asked twice is embedded once
    first.save()
    inner = Counting()
    again = CachedEmbedder(inner, tmp_path)
    assert [v.data for v in again.embed(["a greyhound", "a finch"])] == [v.data for v in vectors[:2]]
    assert inner.calls == []
    assert again.misses == 0
    again.embed_query(["a greyhound"])  # queries are cached apart from passages
    assert again.misses == 1


def test_the_interval_is_the_normal_95_percent_half_width() -> None:
    assert interval95([1.0]) == 0.0
    assert interval95([0.0, 1.0, 0.0, 1.0]) == pytest.approx(1.96 * (1 / 3) ** 0.5 / 2, abs=1e-4)


def test_per_conversation_figures_leave_out_adversarial_questions() -> None:
    details = [
        {"conversation": "c1", "category": 1, "profiles": {"default": {"recall": {5: 1.0, 10: 1.0}}}},
        {"conversation": "c1", "category": 4, "profiles": {"default": {"recall": {5: 0.0, 10: 1.0}}}},
        {"conversation": "c1", "category": 5, "profiles": {"default": {"recall": {5: 0.0, 10: 0.0}}}},
        {"conversation": "c2", "category": 2, "profiles": {"default": {"recall": {5: 0.5, 10: 0.5}}}},
    ]
    out = per_conversation(details, ["default"])["default"]
    assert out["c1"]["questions"] == 2
    assert out["c1"]["recall"] == {"5": 0.5, "10": 1.0}
    assert out["c2"]["recall"] == {"5": 0.5, "10": 0.5}


def test_the_page_puts_the_embedders_side_by_side(conversations: Any, tmp_path: Path) -> None:
    from bench.page_recall import render as render_page_section

    report = evaluate(
        conversations,
        [Candidate("hashing", HashingEmbedder()), Candidate("hashing-64", HashingEmbedder(dim=64))],
        cache=tmp_path,
    )
    section = render_page_section({"locomo-models": report})
    assert section is not None
    assert "| R@5 / R@10 (± 95%) | hashing (hashing-384) | hashing-64 (hashing-64) |" in section
    assert "| **overall 1–4** | 1.000 / 1.000 ± 0.000 |" in section
    assert "| syn-b |" in section
    assert render_page_section({}) is None


def test_the_full_run_keeps_the_locomo_shape_and_adds_each_embedder(tmp_path: Path) -> None:
    from bench.locomo_models import full

    path = tmp_path / "syn.json"
    path.write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    report = full(path, ["hashing"], cache=tmp_path / "cache", profiles=["default", "lexical"])
    assert report["benchmark"] == "locomo-embedders"
    assert set(report["profiles"]["default"]["overall"]["recall"]) >= {
        "5",
        "10",
    }  # `engram bench locomo`'s shape
    mine = report["embedders"]["hashing"]
    assert mine["config"]["embedding_model"] == "hashing-384"
    assert mine["profiles"]["lexical"]["overall"]["recall"]["1"] == 1.0
    assert set(mine["conversations"]["default"]) == {"syn-a", "syn-b"}
    assert "ci95" in mine["profiles"]["default"]["categories"]["1"]
    assert (tmp_path / "cache" / "hashing-384-p.npz").exists()

    from bench.page_recall import render as render_page_section

    section = render_page_section({"locomo-embedders": report})
    assert section is not None
    assert "| profile lexical: R@5 / R@10 | hashing (hashing-384) |" in section
    assert "| **overall 1–4** | 1.000 / 1.000 ± 0.000 |" in section


def test_the_page_shows_both_thread_settings_of_the_spinning_bench() -> None:
    from bench.page_recall import render as render_page_section

    runs = [
        {"spinning": True, "query_ms": {"p50": 30.0, "p95": 70.0}, "texts_per_s": 35.0},
        {"spinning": False, "query_ms": {"p50": 20.0, "p95": 45.0}, "texts_per_s": 41.5},
    ]
    section = render_page_section({"embedder-spinning": {"date": "2026-11-27T21:24:00", "runs": runs}})
    assert section is not None
    assert "| on (onnxruntime's default) | 30.0 | 70.0 | 35.0 |" in section
    assert "| **off** (Engram's setting) | 20.0 | 45.0 | 41.5 |" in section
