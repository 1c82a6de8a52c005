"""Issue #10: sessions and their summaries (rolling, session, spine) written by the summariser, on
both backends; without an LLM by the extractive method (ADR 0053)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.conversation import MAX_ROLLING_CHARS, check_session_summary, check_spine
from engram.services.bootstrap import Engram
from tests.session_support import CHAT, T0, chat, rows, summarize


def _aria(engram: Engram) -> UUID:
    return UUID(engram.beings.register("Aria").being_id)


def test_closed_session_open_session_and_spine_are_summarized_extractively(engram: Engram) -> None:
    being_id = _aria(engram)
    chat(engram, "Aria", "lena", CHAT)  # session 1: 12 messages, a minute apart
    later = [("user", f"Back again, the garden project goes well, day {i}.") for i in range(9)]
    chat(engram, "Aria", "lena", later, start=T0 + timedelta(hours=3), prefix="b")  # closes session 1

    report = summarize(engram, "Aria")

    assert (report.sessions, report.rolling, report.spines, report.rejected) == (1, 1, 1, 0)
    engram.views.ensure()
    reads = engram.views.conversations
    first, second = sorted(reads.sessions(being_id, user="lena"), key=lambda s: s["ordinal"])
    assert first["close_reason"] == "gap" and first["turns"] == 12 and first["summary_method"] == "extractive"
    summary = json.loads(first["summary_json"])
    assert check_session_summary(summary) == summary  # within the domain's bounds
    assert summary["one_liner"].startswith("12 messages with lena")
    assert "Tomas" in summary["people"] and "Lena" not in summary["people"]  # the user is not "mentioned"
    assert any("renew my nursing licence" in loop for loop in summary["open_loops"])
    assert any("I'll remind you" in c or "I will buy seeds" in c for c in summary["commitments"])
    assert second["ended_at"] is None and second["rolling_method"] == "extractive"
    assert 0 < len(second["rolling_text"]) <= MAX_ROLLING_CHARS
    [spine] = rows(engram, being_id, "spine")
    sections = json.loads(spine["content"])
    assert check_spine(sections) == sections and spine["upto"] == 21 and spine["method"] == "extractive"
    assert "Tomas" in sections["PEOPLE"]

    again = summarize(engram, "Aria")  # nothing is due any more
    assert (again.sessions, again.rolling, again.spines, again.conversations) == (0, 0, 0, 0)


def test_the_rolling_summary_keeps_every_version_each_built_on_the_one_before(engram: Engram) -> None:
    being_id = _aria(engram)
    chat(engram, "Aria", "lena", CHAT[:4])
    summarize(engram, "Aria")
    chat(engram, "Aria", "lena", CHAT[4:8], start=T0 + timedelta(minutes=4), prefix="n")
    summarize(engram, "Aria")

    versions = sorted(rows(engram, being_id, "rolling"), key=lambda r: r["version"])
    assert [(v["version"], v["upto"]) for v in versions] == [(1, 4), (2, 8)]
    first, second = (v["content"] for v in versions)
    # Nothing the first version held is lost while the text fits its 600 characters.
    assert all(line in second.split("\n") for line in first.split("\n"))
    assert len(second) <= MAX_ROLLING_CHARS


def test_the_worker_round_goes_on_past_a_conversation_that_fails(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    being_id = _aria(engram)
    for user in ("ann", "bob"):
        chat(engram, "Aria", user, CHAT[:4], prefix=user)
    engram.views.ensure()
    writer = engram.summaries.writer
    rolling = writer.rolling

    def failing(previous: Any, session: Any, new: Any, being: str, user: str) -> Any:
        if user == "ann":
            raise RuntimeError("ann's summary broke")
        return rolling(previous, session, new, being, user)

    monkeypatch.setattr(writer, "rolling", failing)

    report = engram.summaries.worker_round()

    assert report.rolling == 1 and len(report.errors) == 1 and "ann's summary broke" in report.errors[0]
    done = {r["user_id"] for r in rows(engram, being_id, "rolling")}
    assert done == {"bob"}
    with pytest.raises(RuntimeError, match="ann's summary broke"):  # asked for one being: it says so
        engram.summaries.run_due("Aria")
