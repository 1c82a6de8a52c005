"""The conversations view (issue #10, ADR 0052): messages, conversations, sessions and summaries.

- `messages`: each message as delivered, with its cleaned journal text (None: not journalled), its
  UTC day, its conversation and session, and its log position (the journals refresh from it).
- `conversations`: spec 004's SessionState per being and user, and what summarising work is due.
- `sessions`: each session with its times, turns, close reason, latest rolling summary and summary.
- `conversation_summaries`: every version of every rolling summary, session summary and spine (and
  every refused LLM answer), so that "what did the summary say before" has an answer.

Everything is in the events: a rebuild never calls an LLM.
"""

from __future__ import annotations

import json
from typing import Any

from engram.domain.conversation import (
    LAST_USER_MESSAGE_CHARS,
    ROLLING_EVERY,
    SPINE_EVERY,
    Conversation,
    SummaryKind,
)
from engram.domain.message import Message, Role, clean_message_text, journal_text
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.tables import Index, TableSpec

MESSAGES = TableSpec(
    name="messages",
    columns={
        "id": "id",
        "being_id": "id",
        "message_key": "text",  # the caller's message id
        "conversation_id": "id",
        "user_id": "text",
        "channel": "text",
        "role": "text",
        "text": "text",  # verbatim
        "clean": "text",  # the cleaned text journals and extraction read; None: not journalled
        "at": "text",  # utc_text
        "day": "text",  # YYYY-MM-DD of `at` in UTC: the daily journal it belongs to
        "session_id": "id",
        "number": "int",  # its number in the conversation (from 1)
        "urgent": "bool",
        "priority": "int",
        "received_at": "text",  # utc_text of the intake's clock
        "position": "int",
    },
    indexes=(
        Index("recent", ("being_id", "at")),
        Index("session", ("session_id", "at")),
        Index("conversation", ("conversation_id", "number")),
        Index("day", ("being_id", "day", "at")),
        Index("written", ("being_id", "position")),
    ),
)

CONVERSATIONS = TableSpec(
    name="conversations",
    columns={
        "id": "id",
        "being_id": "id",
        "user_id": "text",
        "message_count": "int",
        "last_interaction": "text",  # utc_text
        "last_user_message": "text",
        "open_session_id": "id",
        "open_turns": "int",
        "rolled_turns": "int",
        "last_received": "text",  # utc_text: when the open session's latest message arrived
        "rolling_due": "bool",
        "spine_version": "int",
        "spine_upto": "int",
        "spine_due": "bool",
        "unsummarized": "int",  # closed sessions without a summary yet
        "sessions_due": "bool",  # unsummarized, and no refused answer since the last message
        "rejections": "int",
        # the message count when an LLM answer was last refused, per kind: due again after it
        "rolling_refused_at": "int",
        "session_refused_at": "int",
        "spine_refused_at": "int",
        "created_at": "text",
        "version": "int",
        "position": "int",
    },
    indexes=(
        Index("user", ("being_id", "user_id")),
        Index("idle", ("last_received",), where="open_session_id IS NOT NULL"),
        Index("due", ("being_id",), where="rolling_due OR spine_due OR sessions_due"),
    ),
)

SESSIONS = TableSpec(
    name="sessions",
    columns={
        "id": "id",
        "being_id": "id",
        "conversation_id": "id",
        "user_id": "text",
        "ordinal": "int",
        "started_at": "text",  # utc_text of its first message
        "last_at": "text",  # utc_text of its latest message
        "ended_at": "text",  # None while open
        "close_reason": "text",  # gap | idle
        "closed_seen_at": "text",  # the later message's time or the worker's clock reading
        "turns": "int",
        "rolling_version": "int",  # of the conversation's rolling summaries, the latest of this session
        "rolling_text": "text",
        "rolling_method": "text",
        "summary_json": "text",
        "summary_method": "text",
        "summarized": "bool",
        "position": "int",
    },
    indexes=(
        Index("recent", ("being_id", "started_at")),
        Index("conversation", ("conversation_id", "ordinal")),
        Index("to_summarize", ("being_id",), where="ended_at IS NOT NULL AND NOT summarized"),
    ),
)

SUMMARIES = TableSpec(
    name="conversation_summaries",
    columns={
        "id": "text",  # "<conversation id>/<event version>"
        "being_id": "id",
        "conversation_id": "id",
        "user_id": "text",
        "session_id": "id",  # None for a spine
        "kind": "text",  # rolling | session | spine
        "version": "int",  # rolling and spine: their version; session: the conversation's event version
        "content": "text",  # rolling: the text; session and spine: JSON
        "method": "text",  # extractive | llm | rejected
        "model": "text",
        "prompt_version": "text",
        "answer": "text",  # the LLM's capped answer
        "reason": "text",  # why an answer was refused
        "upto": "int",  # rolling: the turn it covers; spine: the message count
        "at": "text",
        "position": "int",
    },
    indexes=(
        Index("conversation", ("conversation_id", "kind", "position")),
        Index("session", ("session_id", "kind")),
    ),
)


class ConversationsView(Projection):
    name = "conversations"
    schema_version = 2  # 2: a refused summary waits for the next message (sessions_due, *_refused_at)
    tables = (MESSAGES, CONVERSATIONS, SESSIONS, SUMMARIES)

    def prefetch(self, batch: Batch, events: Any) -> None:
        ids = {str(e.originator_id) for e in events if isinstance(e, Conversation.Event)}
        ids |= {str(e.conversation_id) for e in events if isinstance(e, Message.Received)}
        batch.conversations.prefetch(batch.conn, list(ids))
        sessions = {str(e.session_id) for e in events if getattr(e, "session_id", None) is not None}
        batch.sessions.prefetch(batch.conn, list(sessions))

    def _conversation(self, batch: Batch, e: Any) -> dict[str, Any]:
        row = batch.conversations.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(
                f"conversations view: {type(e).__qualname__} for unknown conversation {e.originator_id}"
            )
        return row

    def _put_conversation(self, batch: Batch, e: Any, row: dict[str, Any], **changes: Any) -> None:
        row.update(changes, version=e.originator_version, position=batch.position)
        # As `Conversation.rolling_due`, `spine_due` and `sessions_due` have it.
        count = row["message_count"]
        row["rolling_due"] = (
            row["open_session_id"] is not None
            and row["open_turns"] - row["rolled_turns"] >= ROLLING_EVERY
            and (row["rolling_refused_at"] is None or row["rolling_refused_at"] < count)
        )
        row["spine_due"] = count - row["spine_upto"] >= SPINE_EVERY and (
            row["spine_refused_at"] is None or row["spine_refused_at"] < count
        )
        row["sessions_due"] = row["unsummarized"] > 0 and (
            row["session_refused_at"] is None or row["session_refused_at"] < count
        )
        batch.conversations.put(row)

    def _session(self, batch: Batch, session_id: Any) -> dict[str, Any]:
        row = batch.sessions.get(batch.conn, str(session_id))
        if row is None:
            raise LookupError(f"conversations view: unknown session {session_id}")
        return row

    def _summary(self, batch: Batch, e: Any, kind: str, **fields: Any) -> None:
        conversation = self._conversation(batch, e)
        session_id = getattr(e, "session_id", None)
        batch.conversation_summaries.put(
            {
                "id": f"{e.originator_id}/{e.originator_version}",
                "being_id": str(e.being_id),
                "conversation_id": str(e.originator_id),
                "user_id": conversation["user_id"],
                "session_id": str(session_id) if session_id is not None else None,
                "kind": kind,
                "version": fields.pop("version", e.originator_version),
                "model": getattr(e, "model", None),
                "prompt_version": getattr(e, "prompt_version", None),
                "answer": getattr(e, "answer", None),
                "at": utc_text(e.timestamp),
                "position": batch.position,
                "reason": None,
                "upto": None,
                **fields,
            }
        )

    @handles(Message.Received)
    def _received(self, batch: Batch, e: Message.Received) -> None:
        at = utc_text(e.at)
        batch.messages.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "message_key": e.message_key,
                "conversation_id": str(e.conversation_id),
                "user_id": e.user,
                "channel": e.channel,
                "role": e.role,
                "text": e.text,
                "clean": journal_text(e.text),
                "at": at,
                "day": at[:10],
                "session_id": str(e.session_id) if e.session_id is not None else None,
                "number": e.number,
                "urgent": e.urgent,
                "priority": e.priority,
                "received_at": utc_text(e.timestamp),
                "position": batch.position,
            }
        )
        if e.role == Role.USER.value:
            # From the message's own event (sealed under its key), not from the conversation's
            # (ADR 0093): once the message is forgotten, a rebuild takes the user's previous message.
            # Its conversation's events come before it in the save (`MessageCommands.take`).
            row = batch.conversations.get(batch.conn, str(e.conversation_id))
            if row is not None:
                row.update(last_user_message=clean_message_text(e.text)[:LAST_USER_MESSAGE_CHARS])
                batch.conversations.put(row)

    @handles(Conversation.Started)
    def _started(self, batch: Batch, e: Conversation.Started) -> None:
        batch.conversations.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "user_id": e.user,
                "message_count": 0,
                "last_interaction": None,
                "last_user_message": None,
                "open_session_id": None,
                "open_turns": 0,
                "rolled_turns": 0,
                "last_received": None,
                "rolling_due": False,
                "spine_version": 0,
                "spine_upto": 0,
                "spine_due": False,
                "unsummarized": 0,
                "sessions_due": False,
                "rejections": 0,
                "rolling_refused_at": None,
                "session_refused_at": None,
                "spine_refused_at": None,
                "created_at": utc_text(e.timestamp),
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(Conversation.SessionOpened)
    def _opened(self, batch: Batch, e: Conversation.SessionOpened) -> None:
        row = self._conversation(batch, e)
        started = utc_text(e.started_at)
        batch.sessions.put(
            {
                "id": str(e.session_id),
                "being_id": str(e.being_id),
                "conversation_id": str(e.originator_id),
                "user_id": row["user_id"],
                "ordinal": e.ordinal,
                "started_at": started,
                "last_at": started,
                "ended_at": None,
                "close_reason": None,
                "closed_seen_at": None,
                "turns": 0,
                "rolling_version": None,
                "rolling_text": None,
                "rolling_method": None,
                "summary_json": None,
                "summary_method": None,
                "summarized": False,
                "position": batch.position,
            }
        )
        self._put_conversation(
            batch,
            e,
            row,
            open_session_id=str(e.session_id),
            open_turns=0,
            rolled_turns=0,
            last_received=utc_text(e.timestamp),
        )

    @handles(Conversation.Heard)
    def _heard(self, batch: Batch, e: Conversation.Heard) -> None:
        row = self._conversation(batch, e)
        at = utc_text(e.at)
        changes: dict[str, Any] = {"message_count": row["message_count"] + 1}
        if row["last_interaction"] is None or at > row["last_interaction"]:
            changes["last_interaction"] = at
        if e.session_id is not None and str(e.session_id) == row["open_session_id"]:
            changes["open_turns"] = row["open_turns"] + 1
            changes["last_received"] = utc_text(e.timestamp)
            session = self._session(batch, e.session_id)
            session.update(
                turns=session["turns"] + 1, last_at=max(session["last_at"], at), position=batch.position
            )
            batch.sessions.put(session)
        self._put_conversation(batch, e, row, **changes)

    @handles(Conversation.SessionClosed)
    def _closed(self, batch: Batch, e: Conversation.SessionClosed) -> None:
        row = self._conversation(batch, e)
        session = self._session(batch, e.session_id)
        session.update(
            ended_at=utc_text(e.ended_at),
            close_reason=e.reason,
            closed_seen_at=utc_text(e.seen_at),
            turns=e.turns,
            position=batch.position,
        )
        batch.sessions.put(session)
        self._put_conversation(
            batch,
            e,
            row,
            open_session_id=None,
            open_turns=0,
            rolled_turns=0,
            last_received=None,
            unsummarized=row["unsummarized"] + 1,
        )

    @handles(Conversation.RollingSummarized)
    def _rolling(self, batch: Batch, e: Conversation.RollingSummarized) -> None:
        row = self._conversation(batch, e)
        session = self._session(batch, e.session_id)
        session.update(
            rolling_version=e.version, rolling_text=e.text, rolling_method=e.method, position=batch.position
        )
        batch.sessions.put(session)
        changes: dict[str, Any] = {}
        if row["open_session_id"] == str(e.session_id):
            changes["rolled_turns"] = max(row["rolled_turns"], e.upto_turn)
        self._put_conversation(batch, e, row, **changes)
        self._summary(
            batch,
            e,
            SummaryKind.ROLLING.value,
            version=e.version,
            content=e.text,
            method=e.method,
            upto=e.upto_turn,
        )

    @handles(Conversation.SessionSummarized)
    def _session_summary(self, batch: Batch, e: Conversation.SessionSummarized) -> None:
        row = self._conversation(batch, e)
        session = self._session(batch, e.session_id)
        first = not session["summarized"]
        content = json.dumps(e.summary, ensure_ascii=False)
        session.update(
            summary_json=content, summary_method=e.method, summarized=True, position=batch.position
        )
        batch.sessions.put(session)
        self._put_conversation(
            batch, e, row, unsummarized=row["unsummarized"] - 1 if first else row["unsummarized"]
        )
        self._summary(batch, e, SummaryKind.SESSION.value, content=content, method=e.method)

    @handles(Conversation.SpineWritten)
    def _spine(self, batch: Batch, e: Conversation.SpineWritten) -> None:
        row = self._conversation(batch, e)
        self._put_conversation(batch, e, row, spine_version=e.version, spine_upto=e.upto_count)
        self._summary(
            batch,
            e,
            SummaryKind.SPINE.value,
            version=e.version,
            content=json.dumps(e.sections, ensure_ascii=False),
            method=e.method,
            upto=e.upto_count,
        )

    @handles(Conversation.SummariesWithdrawn)
    def _withdrawn(self, batch: Batch, e: Conversation.SummariesWithdrawn) -> None:
        # The counters as the conversation has them without the erased summaries (ADR 0093); their
        # rows and the sessions' summaries go with the rebuild `forget message` runs.
        row = self._conversation(batch, e)
        refused = {f"{kind}_refused_at": e.refused.get(kind) for kind in ("rolling", "session", "spine")}
        changes: dict[str, Any] = {
            "spine_version": e.spine_version,
            "spine_upto": e.spine_upto,
            "unsummarized": len(e.unsummarized),
            "rejections": e.rejections,
            **refused,
        }
        if e.rolled_turns is not None and row["open_session_id"] is not None:
            changes["rolled_turns"] = e.rolled_turns
        self._put_conversation(batch, e, row, **changes)

    @handles(Conversation.SummaryRejected)
    def _rejected(self, batch: Batch, e: Conversation.SummaryRejected) -> None:
        row = self._conversation(batch, e)
        refused = {f"{e.kind}_refused_at": row["message_count"]}
        self._put_conversation(batch, e, row, rejections=row["rejections"] + 1, **refused)
        self._summary(batch, e, e.kind, content=None, method="rejected", reason=e.reason)
