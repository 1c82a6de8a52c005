"""Message intake on both backends (issue #10, ADR 0052): sessions from message times, late messages,
session state, exactly once by id (also for two deliveries at once), two users apart, every read
scoped to its being, a conversation replayed from a snapshot equal to one replayed without."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.conversation import Conversation
from engram.domain.errors import DomainError, InvalidInput
from engram.domain.ids import conversation_id_for
from engram.domain.message import Message
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput
from engram.services.config import Settings
from engram.services.errors import Conflict
from tests.message_cases import bad_messages
from tests.support import SeededIds, SteppingClock, race

T0 = datetime(2026, 10, 30, 9, 0, tzinfo=UTC)  # before the test clock (2026-11-01): history


def _msg(key: str, minutes: float, user: str = "mina", text: str = "hello there", **kw: Any) -> MessageInput:
    return MessageInput(id=key, user=user, text=text, at=T0 + timedelta(minutes=minutes), **kw)


def _being(engram: Engram, name: str = "Aria") -> UUID:
    return UUID(engram.beings.register(name).being_id)


def _messages_of(engram: Engram) -> int:
    return sum(1 for e in engram.audit.log(limit=10_000) if e["type"] == "Message.Received")


def test_sessions_follow_the_message_times(engram: Engram) -> None:
    aria = _being(engram)
    taken = engram.messages.take_many(
        "Aria",
        [_msg("a", 0), _msg("b", 20), _msg("c", 50), _msg("d", 80.5), _msg("e", 81, role="assistant")],
    ).messages
    first, second = taken[0].session_id, taken[3].session_id
    assert [t.session_id for t in taken] == [first, first, first, second, second]
    assert first != second and [t.number for t in taken] == [1, 2, 3, 4, 5]
    engram.views.ensure()
    reads = engram.views.conversations
    sessions = reads.sessions(aria, user="mina")
    assert [(s["ordinal"], s["turns"], s["close_reason"]) for s in sessions] == [(2, 2, None), (1, 3, "gap")]
    state = reads.conversation(aria, "mina")
    assert state is not None
    assert (state["message_count"], state["open_turns"], state["last_user_message"]) == (5, 2, "hello there")
    assert state["last_interaction"].startswith("2026-10-30T10:21:00")


def test_a_late_message_joins_the_open_session_or_none(engram: Engram) -> None:
    _being(engram)
    open_now = engram.messages.take_many("Aria", [_msg("a", 0), _msg("b", 100)]).messages[1].session_id
    late = engram.messages.take("Aria", _msg("late", 75))  # 25 minutes before the open session began
    assert late.session_id == open_now
    older = engram.messages.take("Aria", _msg("older", 60))  # 40 minutes before: in no session
    assert older.session_id is None and older.number == 4
    engram.views.ensure()
    row = engram.views.conversations.message(UUID(older.being_id), older.message_id)
    assert row is not None and row["session_id"] is None


def test_a_message_is_taken_once_per_id(engram: Engram) -> None:
    _being(engram)
    first = engram.messages.take("Aria", _msg("m-1", 0))
    head = engram.store.head()
    again = engram.messages.take("Aria", _msg("m-1", 0))
    assert again.duplicate and not first.duplicate
    assert (again.message_id, again.session_id, again.number) == (first.message_id, first.session_id, 1)
    assert engram.store.head() == head  # nothing written
    # Without `at`, a retry means the same message: a duplicate too.
    engram.messages.take("Aria", MessageInput(id="m-2", user="mina", text="no time given"))
    head = engram.store.head()
    assert engram.messages.take("Aria", MessageInput(id="m-2", user="mina", text="no time given")).duplicate
    assert engram.store.head() == head
    for other in (
        _msg("m-1", 0, text="something else"),
        _msg("m-1", 0, user="tom"),
        _msg("m-1", 5),
        _msg("m-1", 0, role="assistant"),
    ):
        with pytest.raises(Conflict) as refused:
            engram.messages.take("Aria", other)
        assert refused.value.code == "conflict" and refused.value.details["field"] == "id"
    assert engram.store.head() == head
    # In a batch, the same id twice is one message.
    batch = engram.messages.take_many("Aria", [_msg("m-3", 1), _msg("m-3", 1)]).messages
    assert [b.duplicate for b in batch] == [False, True] and _messages_of(engram) == 3


def test_a_refused_message_refuses_its_batch_or_is_skipped(engram: Engram) -> None:
    _being(engram)
    engram.messages.take("Aria", _msg("m-1", 0))
    head = engram.store.head()
    with pytest.raises(Conflict) as refused:
        engram.messages.take_many("Aria", [_msg("m-2", 1), _msg("m-1", 0, text="changed")])
    assert refused.value.details["index"] == 1 and engram.store.head() == head
    skipped = engram.messages.take_many(
        "Aria", [_msg("m-2", 1), _msg("m-1", 0, text="changed"), _msg("m-3", 2)], skip_refused=True
    )
    assert [m.id for m in skipped.messages] == ["m-2", "m-3"]
    assert [(r["index"], r["code"], r["field"]) for r in skipped.refused] == [(1, "conflict", "id")]


def test_two_deliveries_of_one_id_at_once_write_one_event(
    engram: Engram, make_settings: Callable[..., Settings]
) -> None:
    """Both writers find no message before either saves (a barrier holds each first save): one save
    loses the race, its command runs again, finds the message and answers `duplicate`."""
    aria = _being(engram)
    other = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(10_000))
    try:
        a, b = race(
            engram, other, lambda e, name: e.messages.take("Aria", _msg("m-race", 0, text="said once"))
        )
    finally:
        other.close()
    assert not isinstance(a, Exception) and not isinstance(b, Exception), (a, b)
    assert sorted([a.duplicate, b.duplicate]) == [False, True]
    assert a.message_id == b.message_id and a.number == b.number == 1
    assert _messages_of(engram) == 1
    conversation = engram.store.get(Conversation, conversation_id_for(aria, "mina"))
    assert conversation.message_count == 1
    heard = [e for e in engram.store.events(conversation.id) if isinstance(e, Conversation.Heard)]
    assert len(heard) == 1


def test_two_users_have_their_own_conversations(engram: Engram) -> None:
    aria = _being(engram)
    taken = engram.messages.take_many(
        "Aria", [_msg("a", 0), _msg("b", 1, user="tom"), _msg("c", 2), _msg("d", 3, user="tom")]
    ).messages
    assert [t.number for t in taken] == [1, 1, 2, 2]
    assert taken[0].session_id != taken[1].session_id
    assert taken[0].conversation_id != taken[1].conversation_id
    engram.views.ensure()
    reads = engram.views.conversations
    assert [c["user_id"] for c in reads.conversations(aria)] == ["tom", "mina"]
    assert {s["user_id"] for s in reads.sessions(aria, user="tom")} == {"tom"}


def test_every_read_is_scoped_to_its_being(engram: Engram) -> None:
    aria, bo = _being(engram), _being(engram, "Bo")
    a = engram.messages.take("Aria", _msg("same-id", 0, text="tomatoes in the garden"))
    b = engram.messages.take("Bo", _msg("same-id", 0, text="tomatoes on the balcony"))
    assert not b.duplicate and a.message_id != b.message_id  # one id per being, not across beings
    engram.views.ensure()
    reads = engram.views.conversations
    assert reads.message(bo, a.message_id) is None and reads.message(aria, a.message_id) is not None
    assert reads.session(bo, a.session_id or "") is None
    assert set(reads.messages_by_ids(bo, [a.message_id, b.message_id])) == {b.message_id}
    assert [c["being_id"] for c in reads.conversations(bo)] == [str(bo)]
    hits = engram.message_search.search("Bo", "tomatoes").hits
    assert [h.message_id for h in hits] == [b.message_id]
    with pytest.raises(DomainError):
        engram.store.get(Message, UUID(a.message_id), being_id=bo)


def test_a_conversation_from_a_snapshot_equals_one_replayed_without(engram: Engram) -> None:
    _being(engram)
    # 120 messages, a new session every 20 (an hour apart): 132 events.
    items = [_msg(f"m-{i}", i + (i // 20) * 60, text=f"message number {i}") for i in range(120)]
    for start in range(0, 120, 7):  # several saves, so that the interval is crossed between two
        engram.messages.take_many("Aria", items[start : start + 7])
    conversation_id = conversation_id_for(UUID(engram.messages.take("Aria", items[0]).being_id), "mina")
    events = engram.store.events(conversation_id)
    assert len(events) > 100
    snapshots = engram.store.app.snapshots
    assert snapshots is not None and list(snapshots.get(conversation_id, desc=True, limit=1))
    from_snapshot = engram.store.app.repository.get(conversation_id)
    replayed: Any = None
    for event in events:
        replayed = event.mutate(replayed)
    assert vars(from_snapshot) == vars(replayed)
    assert from_snapshot.message_count == 120 and from_snapshot.sessions == 6


@bad_messages()
def test_bad_messages_are_refused_naming_the_field(
    engram: Engram, fields: dict[str, Any], field: str, code: str
) -> None:
    _being(engram)
    head = engram.store.head()
    with pytest.raises((InvalidInput, ValueError)) as refused:
        engram.messages.take("Aria", MessageInput.model_validate(fields))
    error = refused.value
    if isinstance(error, InvalidInput):
        assert error.code == code and error.details["field"] == field, error.details
    else:  # pydantic refused the type: the field is the first of its location
        assert field in {str(e["loc"][0]) for e in error.errors()}, error  # type: ignore[attr-defined]
    assert engram.store.head() == head
