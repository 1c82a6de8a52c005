"""`engram bench locomo-context`: a turn embedded with its neighbours in the same session, side by side
with today's `<date> <text>` (docs/recall.md, "Memory side")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.locomo import load
from bench.locomo_context import WINDOWS, Window, context_text, evaluate, neighbours, render
from engram.adapters.embedders import HashingEmbedder
from tests.integration.test_bench_locomo import qa, turn

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
