"""The Conversation's summary rules the summariser relies on (ADR 0052, 0053)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from engram.domain.conversation import SPINE_SECTIONS, Conversation
from engram.domain.erasure import ContentErased
from engram.domain.errors import InvalidInput

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
GAP = timedelta(minutes=30)
SPINE = {s: [f"{s.lower()} item"] for s in SPINE_SECTIONS}


def _conversation(messages: int) -> Conversation:
    c = Conversation.start(uuid4(), uuid4(), "lena", T0)
    for i in range(messages):
        at = T0 + timedelta(minutes=i)
        c.hear(uuid4(), at, "user", f"message {i}", at, timedelta(minutes=30))
    return c


def test_a_spine_covers_new_messages_unless_it_redoes_the_latest() -> None:
    c = _conversation(20)
    c.write_spine(SPINE, 20, T0, method="extractive")
    with pytest.raises(InvalidInput, match="upto_count is 21 to 20"):
        c.write_spine(SPINE, 20, T0, method="llm", model="m", prompt_version="v")

    c.write_spine(SPINE, 20, T0, method="llm", model="m", prompt_version="v", redo=True)

    assert (c.spine_version, c.spine_upto) == (2, 20)
    with pytest.raises(InvalidInput, match="upto_count is 20 to 20"):  # a redo never covers less
        c.write_spine(SPINE, 19, T0, method="llm", model="m", prompt_version="v", redo=True)


def test_no_spine_is_redone_before_a_message_was_said() -> None:
    c = _conversation(0)
    with pytest.raises(InvalidInput, match="upto_count is 1 to 0"):
        c.write_spine(SPINE, 0, T0, method="extractive", redo=True)


@pytest.mark.parametrize("kind", ["rolling", "spine"])
def test_a_refused_summary_waits_for_the_next_message(kind: str) -> None:
    c = _conversation(20)
    due = (lambda: c.rolling_due) if kind == "rolling" else (lambda: c.spine_due)
    assert due()

    c.reject_summary(kind, "the answer carried instructions", T0, model="m", prompt_version="v")

    assert not due()  # not asked again in a loop
    at = T0 + timedelta(minutes=21)
    c.hear(uuid4(), at, "user", "and one more thing", at, timedelta(minutes=30))
    assert due()  # the next trigger


def test_a_refused_session_summary_waits_for_the_next_message() -> None:
    c = _conversation(3)
    at = T0 + timedelta(hours=2)
    c.hear(uuid4(), at, "user", "back after a while", at, timedelta(minutes=30))  # closes session 1
    assert c.sessions_due

    c.reject_summary(
        "session", "empty answer", at, model="m", prompt_version="v", session_id=c.unsummarized[0]
    )

    assert not c.sessions_due
    c.hear(uuid4(), at + timedelta(minutes=1), "user", "still here", at, timedelta(minutes=30))
    assert c.sessions_due


def test_a_conversation_replays_without_a_summary_whose_key_was_destroyed() -> None:
    """ADR 0093: each summary event names a key of its own; once destroyed, the event reads as
    `ErasedContent`, the conversation replays without it, and the summary is due again."""
    from engram.domain.conversation import summary_key_for
    from engram.domain.erasure import ErasedContent

    c = Conversation.start(uuid4(), uuid4(), "lena", T0)
    for i in range(4):
        c.hear(uuid4(), T0 + timedelta(minutes=i), "user", f"line {i}", T0 + timedelta(minutes=i), GAP)
    c.summarize_rolling("four lines", 4, T0 + timedelta(minutes=5), method="extractive")
    events = c.collect_events()
    rolled = events[-1]
    assert isinstance(rolled, Conversation.RollingSummarized)
    assert rolled.summary_key == summary_key_for(c.id, rolled.originator_version) != c.id
    assert not Conversation.Heard.__dataclass_fields__.keys() & {"excerpt"}  # a Heard quotes no text
    erased = ErasedContent(
        c.id, rolled.originator_version, c.being_id, "engram.Conversation.RollingSummarized"
    )
    replayed: Any = None
    for e in [*events[:-1], erased]:
        replayed = e.mutate(replayed)
    assert replayed.version == c.version and replayed.rolling_due and not c.rolling_due
    with pytest.raises(ContentErased):  # an event the conversation cannot lose still refuses
        ErasedContent(c.id, 2, c.being_id, "engram.Conversation.Heard").mutate(replayed)


def test_withdrawn_summaries_set_a_conversation_held_from_before_as_a_replay_has_it() -> None:
    c = _conversation(20)
    c.write_spine(SPINE, 20, T0, method="extractive")
    held: Any = None  # another process's copy, the spine counted
    for e in c.collect_events():
        held = e.mutate(held)
    replayed = _conversation(20)  # the same conversation read without the erased spine
    replayed.withdraw_summaries(1, T0)
    [withdrawn] = replayed.collect_events()[-1:]
    assert isinstance(withdrawn, Conversation.SummariesWithdrawn) and withdrawn.count == 1
    assert (held.spine_upto, held.spine_due) == (20, False)
    withdrawn.apply(held)
    assert (held.spine_upto, held.spine_version, held.spine_due) == (0, 0, True)
