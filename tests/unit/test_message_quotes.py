"""Which summaries of a conversation cover a message (ADR 0093), from the conversation's events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from engram.domain.conversation import SPINE_SECTIONS, Conversation
from engram.domain.message import Message
from engram.services.message_quotes import message_quotes

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
GAP = timedelta(minutes=30)
SPINE = {s: [] for s in SPINE_SECTIONS}
SUMMARY = {
    "one_liner": "a chat",
    "what_mattered": [],
    "open_loops": [],
    "commitments": [],
    "people": [],
    "tone": "calm",
}


def _message(c: Conversation, i: int, role: str = "user") -> Message:
    at = T0 + timedelta(minutes=i)
    mid = uuid4()
    session, number = c.hear(mid, at, role, f"line {i}", at, GAP)
    return Message.receive(
        mid,
        c.being_id,
        message_key=f"m{i}",
        user="lena",
        channel="chat",
        role=role,
        text=f"line {i}",
        at=at,
        received_at=at,
        conversation_id=c.id,
        session_id=session,
        number=number,
    )


def _keys(events: list[Any], kinds: tuple[type, ...]) -> list[UUID]:
    return [e.summary_key for e in events if isinstance(e, kinds)]


def test_the_summaries_written_after_a_message_of_its_session_and_the_spines_covering_it() -> None:
    c = Conversation.start(uuid4(), uuid4(), "lena", T0)
    early = [_message(c, i) for i in range(4)]
    c.summarize_rolling("before", 4, T0, method="extractive")  # covers early[0..3], not `said`
    said = _message(c, 4)
    for i in range(5, 8):
        _message(c, i)
    c.summarize_rolling("after", 8, T0, method="extractive")
    c.reject_summary("rolling", "bad", T0, model="m", prompt_version="v", session_id=said.session_id)
    for i in range(8, 20):
        _message(c, i)
    c.write_spine(SPINE, 20, T0, method="extractive")
    _message(c, 200)  # a later session (past the gap): its summaries do not cover `said`
    c.summarize_rolling("other session", 1, T0, method="extractive")
    events = c.collect_events()
    assert c.unsummarized  # the first session closed
    c.summarize_session(said.session_id, SUMMARY, T0, method="extractive")
    events += c.collect_events()

    quotes = message_quotes(events, said)
    rolling, rejected, spine, session = (
        [e for e in events if isinstance(e, t)]
        for t in (
            Conversation.RollingSummarized,
            Conversation.SummaryRejected,
            Conversation.SpineWritten,
            Conversation.SessionSummarized,
        )
    )
    assert quotes.summary_keys == [
        rolling[1].summary_key,
        rejected[0].summary_key,
        spine[0].summary_key,
        session[0].summary_key,
    ]
    assert quotes.legacy == 0 and quotes.conversation_id == c.id
    assert message_quotes(events, early[0]).summary_keys[0] == rolling[0].summary_key  # the first covers it


def test_events_of_before_summary_keys_are_counted_as_legacy() -> None:
    c = Conversation.start(uuid4(), uuid4(), "lena", T0)
    said = _message(c, 0)
    for i in range(1, 4):
        _message(c, i)
    c.summarize_rolling("v1", 4, T0, method="extractive")
    events = c.collect_events()
    heard = next(e for e in events if isinstance(e, Conversation.Heard) and e.message_id == said.id)
    object.__setattr__(heard, "excerpt", "line 0")  # as a v1 record reads
    object.__setattr__(events[-1], "summary_key", None)  # a v1 summary: the conversation's key
    quotes = message_quotes(events, said)
    assert (quotes.legacy, quotes.summary_keys) == (2, [])
