"""The `Conversation` aggregate alone (issue #10, ADR 0052): sessions decided from message times, late
messages, and spec 004's session state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from engram.domain.conversation import DEFAULT_SESSION_GAP, Conversation
from engram.domain.errors import InvalidInput
from engram.domain.ids import conversation_id_for, session_id_for

BEING = UUID(int=7)
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
GAP = DEFAULT_SESSION_GAP


def _conversation() -> Conversation:
    return Conversation.start(conversation_id_for(BEING, "mina"), BEING, "mina", T0)


def _hear(c: Conversation, minutes: float, text: str = "hello there", role: str = "user") -> UUID | None:
    session, _ = c.hear(uuid4(), T0 + timedelta(minutes=minutes), role, text, T0, GAP)
    return session


def _closed(c: Conversation) -> list[Conversation.SessionClosed]:
    return [e for e in c.collect_events() if isinstance(e, Conversation.SessionClosed)]


def test_a_gap_of_more_than_30_minutes_opens_session_2_and_exactly_30_does_not() -> None:
    c = _conversation()
    first = _hear(c, 0)
    assert first == session_id_for(c.id, 1)
    assert _hear(c, 30) == first  # exactly the gap after the last message: same session
    assert _hear(c, 60) == first  # measured from the *last* message (30 minutes before)
    second = _hear(c, 90 + 1 / 60)  # 30 minutes and a second after the last one
    assert second == session_id_for(c.id, 2) and second != first
    closed = _closed(c)
    assert [(e.session_id, e.reason, e.turns) for e in closed] == [(first, "gap", 3)]
    assert closed[0].ended_at == T0 + timedelta(minutes=60)
    assert closed[0].seen_at == T0 + timedelta(minutes=90, seconds=1)
    assert c.open is not None and c.open["ordinal"] == 2 and c.open["turns"] == 1
    assert c.sessions == 2


def test_a_late_message_joins_the_open_session_within_the_gap_before_its_start() -> None:
    c = _conversation()
    _hear(c, 0)
    open_session = _hear(c, 60)  # a new session (more than 30 minutes later), started at 60
    assert open_session == session_id_for(c.id, 2)
    assert _hear(c, 31) == open_session  # 29 minutes before the open session started: joins it
    assert _hear(c, 30) == open_session  # exactly the gap before its start: still joins
    assert c.open is not None and c.open["turns"] == 3
    assert _hear(c, 29) is None  # older than that: no session, the closed one is not reopened
    assert c.message_count == 5 and c.open["turns"] == 3
    assert c.last_interaction == T0 + timedelta(minutes=60)  # a late message does not move it back


def test_a_late_message_after_the_session_closed_joins_none_and_opens_none() -> None:
    c = _conversation()
    _hear(c, 0)
    c.close_idle(T0 + timedelta(minutes=45), GAP)
    assert c.open is None
    assert _hear(c, -5) is None  # older than the last interaction, with no session open
    assert c.open is None and c.sessions == 1
    assert _hear(c, 10) == session_id_for(c.id, 2)  # a newer one opens the next session


def test_session_state_counts_messages_and_its_events_quote_no_message() -> None:
    c = _conversation()
    long = "word " * 100
    _hear(c, 0, "  Hello,\n\n  Aria!  ")
    _hear(c, 1, "I am the answer", role="assistant")
    _hear(c, 2, long)
    # The last user message is the view's, from the message's own event (ADR 0093): a `Heard`
    # carries no text, so forgetting a message leaves none of it under the conversation's key.
    heard = [e for e in c.collect_events() if isinstance(e, Conversation.Heard)]
    assert len(heard) == 3 and not any("Hello" in str(vars(e)) or "word" in str(vars(e)) for e in heard)
    assert not hasattr(c, "last_user_message")
    _hear(c, 40)  # session 2
    assert c.message_count == 4  # over all sessions
    assert c.open is not None and c.open["turns"] == 1  # the open session's turns
    assert c.last_interaction == T0 + timedelta(minutes=40)


def test_idle_close_goes_by_arrival_and_records_the_clock() -> None:
    c = _conversation()
    c.hear(uuid4(), T0 - timedelta(days=300), "user", "old history", T0, GAP)  # imported: old time
    assert not c.close_idle(T0 + timedelta(minutes=29), GAP)  # it arrived 29 minutes ago
    assert c.close_idle(T0 + timedelta(minutes=30), GAP)
    [closed] = _closed(c)
    assert (closed.reason, closed.seen_at) == ("idle", T0 + timedelta(minutes=30))
    assert not c.close_idle(T0 + timedelta(hours=5), GAP)  # nothing open any more


def test_the_gap_must_be_positive() -> None:
    with pytest.raises(InvalidInput):
        _conversation().hear(uuid4(), T0, "user", "hi there", T0, timedelta(0))
