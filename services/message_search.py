"""Searching a being's messages by their words (issue #10, ADR 0055): `engram messages search`.

Lexical only: a message matches when it shares a word with the query, ranked BM25-style
(`projections/message_search.py`), the newest first among equal scores; `channel` and `user` filter.
Each hit names the message (the caller's id and Engram's), who said it where and when, its session,
its score and a snippet around the first word that matched.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.message import MAX_CHANNEL_CHARS, MAX_USER_CHARS
from engram.domain.text import check_text
from engram.projections.message_search import MessageSearch
from engram.projections.note_search import terms
from engram.services.beings import resolve_being_id

MAX_MESSAGE_QUERY_CHARS = 4000  # as a memory query (services/reading.py)
DEFAULT_MESSAGE_HITS = 8
MAX_MESSAGE_HITS = 100
SNIPPET_CHARS = 160


class MessageHit(BaseModel):
    id: str = Field(description="The caller's message id.")
    message_id: str = Field(description="Engram's id of the message.")
    user: str
    channel: str | None
    role: str
    at: str = Field(description="When it was said (ISO 8601, UTC).")
    session_id: str | None = Field(description="Its session; None: a late message in none.")
    score: float = Field(description="BM25-style: higher shares more (and rarer) words with the query.")
    snippet: str = Field(description="Its cleaned text around the first word that matched.")


class MessagesFound(BaseModel):
    query: str
    hits: list[MessageHit]


def check_message_query(text: Any, limit: int, channel: str | None, user: str | None) -> str:
    """The query's rules, the same on every interface: 1 to 4,000 characters, no NUL; the filters
    as a message's labels."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the query is empty: give the words to search for", field="query")
    check_text("query", text)
    if len(text) > MAX_MESSAGE_QUERY_CHARS:
        raise InvalidInput(
            f"the query has at most {MAX_MESSAGE_QUERY_CHARS} characters, got {len(text)}", field="query"
        )
    if not 1 <= limit <= MAX_MESSAGE_HITS:
        raise InvalidInput(f"limit is 1 to {MAX_MESSAGE_HITS}", field="limit")
    for field, value, most in (("channel", channel, MAX_CHANNEL_CHARS), ("user", user, MAX_USER_CHARS)):
        if value is not None:
            if not 0 < len(value) <= most:
                raise InvalidInput(f"{field} has 1 to {most} characters", field=field)
            check_text(field, value)
    return text


def snippet(text: str, words: set[str], width: int = SNIPPET_CHARS) -> str:
    """`text` with whitespace collapsed, cut to `width` characters around the first of `words`."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    folded = flat.casefold()
    starts = [i for w in words if (i := folded.find(w)) >= 0]
    first = min(starts) if starts else 0
    begin = max(0, min(first - width // 3, len(flat) - width))
    cut = flat[begin : begin + width]
    return ("…" if begin > 0 else "") + cut + ("…" if begin + width < len(flat) else "")


class MessageSearching:
    def __init__(self, store: Any, views: Any) -> None:
        self.store = store
        self.views = views

    def search(
        self,
        being_ref: str,
        query: str,
        *,
        channel: str | None = None,
        user: str | None = None,
        limit: int = DEFAULT_MESSAGE_HITS,
    ) -> MessagesFound:
        text = check_message_query(query, limit, channel, user)
        being_id: UUID = resolve_being_id(self.store, being_ref)
        self.views.ensure(names=["message_search", "conversations"], being=being_id)
        ranked = MessageSearch(self.views.read).lexical(being_id, text, limit, channel=channel, user=user)
        rows = self.views.conversations.messages_by_ids(being_id, [i for i, _ in ranked])
        words = set(terms(text))
        hits = [
            MessageHit(
                id=row["message_key"],
                message_id=message_id,
                user=row["user_id"],
                channel=row["channel"],
                role=row["role"],
                at=datetime.fromisoformat(row["at"]).isoformat(),
                session_id=str(row["session_id"]) if row["session_id"] is not None else None,
                score=round(score, 4),
                snippet=snippet(row["text"], words),
            )
            for message_id, score in ranked
            if (row := rows.get(message_id)) is not None
        ]
        return MessagesFound(query=text, hits=hits)
