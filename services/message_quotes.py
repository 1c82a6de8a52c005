"""Where a message's words are quoted in its conversation (ADR 0093): the summaries that cover it.

A conversation's summaries (rolling, session, spine, and refused LLM answers that may quote messages)
are each sealed under a key of their own (`summary_key`); forgetting one message destroys the keys of
those that cover it, found here from the conversation's events, oldest first:

- a rolling or session summary (or a refused one) of the message's session, written after the
  message joined it;
- a spine covering the message's number (it is built on the spine before it, which may quote it),
  or a refused spine written after it.

A summary that covers the message but says nothing of it is erased too: the next summarising pass
writes it again from the remaining messages (it is due again once its event reads as erased). Events
written before ADR 0093 (a `Heard` with its excerpt, a summary without a key of its own) are sealed
with the conversation's key: they are reported, and `forget message` refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from engram.domain.conversation import Conversation, SummaryKind, quotes_under_conversation_key
from engram.domain.message import Message


@dataclass
class MessageQuotes:
    conversation_id: UUID
    summary_keys: list[UUID] = field(default_factory=list)  # the summaries covering the message
    legacy: int = 0  # events quoting it under the conversation's key (written before ADR 0093)


def _covers(e: Any, message: Message) -> bool:
    if isinstance(e, Conversation.SpineWritten):
        return bool(e.upto_count >= message.number)
    if isinstance(e, Conversation.SummaryRejected) and e.kind == SummaryKind.SPINE.value:
        return True
    if isinstance(
        e, Conversation.RollingSummarized | Conversation.SessionSummarized | Conversation.SummaryRejected
    ):
        return message.session_id is not None and e.session_id == message.session_id
    return False


def message_quotes(events: list[Any], message: Message) -> MessageQuotes:
    """`events`: the conversation's, as the store reads them (erased ones included)."""
    quotes = MessageQuotes(UUID(str(message.conversation_id)))
    heard = False
    for e in events:
        if not heard:
            if isinstance(e, Conversation.Heard) and e.message_id == message.id:
                heard = True
                quotes.legacy += quotes_under_conversation_key(e)
            continue
        if _covers(e, message):
            key = getattr(e, "summary_key", None)
            if isinstance(key, UUID):
                quotes.summary_keys.append(key)
            else:
                quotes.legacy += 1
    return quotes
