"""The extractive summaries (ADR 0053): deterministic, within the domain's bounds, and what they keep
of a real chat (a LoCoMo session, when the team's copy is on this machine) and of a made-up one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engram.domain.conversation import MAX_ROLLING_CHARS, MAX_SPINE_ITEMS, check_session_summary, check_spine
from engram.services import summary_extractive as x
from tests.session_support import CHAT

ROOT = Path(__file__).resolve().parents[2]


def _locomo() -> Path | None:
    candidates = [os.environ.get("ENGRAM_LOCOMO_DEV", "")]
    candidates += [str(p / "shared" / "bench" / "locomo-dev.json") for p in (ROOT.parent, ROOT.parent.parent)]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def _rows(lines: list[tuple[str, str]], user: str = "lena") -> list[dict[str, Any]]:
    return [
        {"user_id": user, "role": role, "text": text, "clean": " ".join(text.split()), "number": i + 1}
        for i, (role, text) in enumerate(lines)
    ]


def _locomo_session(conversation: int, session: int) -> tuple[list[dict[str, Any]], str]:
    path = _locomo()
    if path is None:
        pytest.skip("the team's LoCoMo copy (../shared/bench/locomo-dev.json) is not on this machine")
    chat = json.loads(path.read_text())[conversation]["conversation"]
    a, b = chat["speaker_a"], chat["speaker_b"]
    turns = chat[f"session_{session}"]
    return _rows([("user" if t["speaker"] == a else "assistant", t["text"]) for t in turns], a), b


def test_a_locomo_session_keeps_its_topic_its_promise_and_its_question() -> None:
    rows, being = _locomo_session(0, 1)  # Caroline and Melanie, 8 May 2023: the support group

    summary = x.session_summary(rows, being)

    assert check_session_summary(summary) == summary
    assert summary["one_liner"].startswith("18 messages with Caroline about support, group")
    mattered = " ".join(summary["what_mattered"])
    assert "LGBTQ support group" in mattered and "accepted" in mattered
    assert not any(len(m.split()) < 6 for m in summary["what_mattered"])  # no "Hey Mel!"
    assert summary["open_loops"] == ["Caroline: Is this your own painting?"]
    assert summary["commitments"] == []  # "Well, I'm off to do some research" promises nothing
    assert "Caroline" not in summary["people"] and "Melanie" not in summary["people"]  # the speakers
    assert summary["tone"] == "positive"


def test_a_locomo_session_keeps_a_promise() -> None:
    rows, being = _locomo_session(0, 2)  # Caroline researches adoption agencies

    summary = x.session_summary(rows, being)

    assert summary["commitments"] == [
        "Caroline: I'll do my best to make sure these kids have a safe and loving home."
    ]
    assert "adoption" in summary["one_liner"] and "kids" in summary["one_liner"]


def test_a_locomo_rolling_summary_stays_within_600_characters_and_keeps_its_lines() -> None:
    rows, being = _locomo_session(1, 2)
    previous: str | None = None
    kept_over_time = []
    for upto in range(4, len(rows) + 1, 4):
        text = x.rolling_summary(previous, rows[:upto], rows[upto - 4 : upto], being)
        assert 0 < len(text) <= MAX_ROLLING_CHARS
        if previous:
            kept_over_time.append(len(set(previous.split("\n")) & set(text.split("\n"))))
        previous = text
    assert previous is not None and "family" in previous.lower()
    assert all(k >= 3 for k in kept_over_time)  # each version builds on the last, never starts over


def test_the_made_up_chat_gives_loops_commitments_people_and_a_spine() -> None:
    rows = _rows(CHAT)

    summary = x.session_summary(rows, "Aria")
    spine = x.spine(None, rows, "Aria")

    assert summary["people"] == ["Tomas"]
    assert "lena: I need to renew my nursing licence before March." in summary["open_loops"]
    assert "lena: Should I start the seeds indoors?" in summary["open_loops"]
    assert "How is work" not in " ".join(summary["open_loops"])  # a greeting is not a loop
    assert set(summary["commitments"]) >= {
        "Aria: I'll remind you about the nursing licence next week.",
        "lena: I will buy seeds on Saturday with Tomas.",
    }
    assert check_spine(spine) == spine
    assert "lena: I'm Lena, I work as a nurse at the city hospital." in spine["PROFILE"]
    assert any("garden project" in p for p in spine["PROJECTS"]) and spine["PEOPLE"] == ["Tomas"]
    assert (
        x.session_summary(rows, "Aria") == summary and x.spine(None, rows, "Aria") == spine
    )  # deterministic


def test_the_spine_merges_the_previous_version_and_keeps_the_newest_over_the_bound() -> None:
    previous = {
        "PROFILE": ["old profile line"],
        "PROJECTS": [f"project {i}" for i in range(MAX_SPINE_ITEMS)],
        "PEOPLE": ["Tomas", "Ines"],
        "OPEN_LOOPS": ["lena: Should I start the seeds indoors?"],
    }
    new = _rows([("user", "I'm planning a trip with Ines and working on a new quilt project.")])

    spine = x.spine(previous, new, "Aria")

    assert check_spine(spine) == spine
    assert spine["PROFILE"][0] == "old profile line"  # kept
    assert len(spine["PROJECTS"]) == MAX_SPINE_ITEMS and "project 0" not in spine["PROJECTS"]  # oldest went
    assert spine["PROJECTS"][-1].startswith("lena: I'm planning a trip with Ines")
    assert spine["PEOPLE"] == ["Tomas", "Ines"]  # a name said again is not doubled
    assert spine["OPEN_LOOPS"] == previous["OPEN_LOOPS"]


def test_another_script_is_scored_by_its_own_words() -> None:
    rows = _rows(
        [
            ("user", "Привет! Я работаю в больнице медсестрой."),
            ("user", "Больница очень большая, работа в больнице трудная."),
            ("user", "Больница далеко от дома, но работа нравится."),
        ],
        "olga",
    )

    summary = x.session_summary(rows, "Aria")

    assert check_session_summary(summary) == summary
    assert summary["one_liner"] == "3 messages with olga about больница, больнице, работа"
    assert "olga: Больница очень большая, работа в больнице трудная." in summary["what_mattered"]
    assert "olga: Привет!" not in summary["what_mattered"]  # a greeting of one word scores nothing
