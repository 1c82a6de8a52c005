"""Conversations written before ADR 0093, on both backends: a `Heard` (v1) that quoted a user
message's excerpt and summaries (v1) sealed under the conversation's key still replay and rebuild; a
message they quote is refused by `forget message` (nothing erased), one they do not quote is
forgotten as any other."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.conversation import LAST_USER_MESSAGE_CHARS, Conversation
from engram.domain.message import clean_message_text
from engram.services.bootstrap import Engram
from engram.services.errors import Conflict
from tests.integration.test_erasure_items import _erased_ids
from tests.integration.test_erasure_purge import _snapshot
from tests.session_support import CHAT, T0, chat


def _v1_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Conversations write their events as v1 code did: `Heard` with the excerpt, summaries
    without a key of their own (the stored records carry no class version, as v1's did)."""
    hear = Conversation.hear

    def old_hear(self: Conversation, message_id: UUID, at: Any, role: Any, text: str, *rest: Any) -> Any:
        placed = hear(self, message_id, at, role, text, *rest)
        heard = self._pending_events[-1]
        excerpt = clean_message_text(text)[:LAST_USER_MESSAGE_CHARS] if role == "user" else None
        object.__setattr__(heard, "excerpt", excerpt)
        return placed

    summarize = Conversation.summarize_rolling

    def old_rolling(self: Conversation, *args: Any, **kwargs: Any) -> None:
        summarize(self, *args, **kwargs)
        object.__setattr__(self._pending_events[-1], "summary_key", None)

    monkeypatch.setattr(Conversation, "hear", old_hear)
    monkeypatch.setattr(Conversation, "summarize_rolling", old_rolling)
    monkeypatch.setattr(Conversation.Heard, "class_version", 1)
    monkeypatch.setattr(Conversation.RollingSummarized, "class_version", 1)


def _write_old(engram: Engram, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    _v1_conversations(monkeypatch)
    engram.beings.register("Aria")
    taken = chat(engram, "Aria", "lena", CHAT[:8])
    engram.views.ensure()
    engram.summaries.run_due("Aria")  # a v1 rolling summary of the first 8 messages
    monkeypatch.undo()  # from here on, today's code
    return taken


def test_an_old_conversation_replays_and_its_quoted_messages_are_refused(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _write_old(engram, monkeypatch)
    events = engram.store.events(UUID(taken[0].conversation_id))
    old = [e for e in events if isinstance(e, Conversation.Heard)]
    assert getattr(old[0], "excerpt", None) == clean_message_text(CHAT[0][1])  # a v1 record, read by v2
    [rolled] = [e for e in events if isinstance(e, Conversation.RollingSummarized)]
    assert rolled.summary_key is None  # upcast: sealed with the conversation's key
    later = chat(engram, "Aria", "lena", CHAT[8:], start=T0 + timedelta(minutes=8), prefix="n")
    engram.views.catch_up_or_rebuild()
    state = engram.sessions.list("Aria", user="lena").state
    assert state is not None and state.message_count == 12
    assert state.last_user_message == clean_message_text(CHAT[10][1])  # from the message's own event
    views = _snapshot(engram)
    engram.views.rebuild_all()
    assert _snapshot(engram) == views  # old and new events rebuild the same rows

    with pytest.raises(Conflict, match="before summaries had keys of their own"):
        engram.item_forgetting.forget_item("message", taken[2].message_id, by="admin")
    with pytest.raises(Conflict):  # an assistant message covered by the v1 rolling summary
        engram.item_forgetting.forget_item("message", taken[3].message_id, by="admin")
    assert _erased_ids(engram) == set()  # nothing was erased
    # A message heard by today's code, after the old summary: forgotten as any other.
    done = engram.item_forgetting.forget_item("message", later[2].message_id, by="admin")
    assert not done.already and UUID(later[2].message_id) in _erased_ids(engram)
    engram.views.catch_up_or_rebuild()
    state = engram.sessions.list("Aria", user="lena").state
    assert state is not None and state.last_user_message == clean_message_text(CHAT[8][1])
