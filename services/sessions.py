"""Sessions as the interfaces show them (issue #10, ADR 0053): a list, one session in full, and what
a context adds for one user. Reads only; every read scoped to one being."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel, Field

from engram.projections.conversation_queries import ConversationReads
from engram.services.beings import list_beings, resolve_being_id
from engram.services.errors import NotFound

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram

DEFAULT_SESSIONS = 20
MAX_SESSIONS = 500
MAX_SESSION_MESSAGES_SHOWN = 500


class SessionRow(BaseModel):
    id: str
    user: str
    ordinal: int = Field(description="The session's number in the conversation with this user, from 1.")
    started_at: str
    last_at: str = Field(description="The time of its latest message.")
    ended_at: str | None = Field(description="None while the session is open.")
    close_reason: str | None = Field(description="gap: a later message came; idle: the worker closed it.")
    closed_seen_at: str | None = Field(description="The later message's time, or the worker's clock reading.")
    turns: int
    summary: dict[str, Any] | None = Field(description="The latest session summary (closed sessions).")
    summary_method: str | None = Field(description="extractive or llm.")
    rolling: str | None = Field(description="The latest rolling summary of the session.")
    rolling_method: str | None


class SummaryVersion(BaseModel):
    kind: str
    version: int
    method: str = Field(description="extractive, llm, or rejected (a refused LLM answer).")
    content: Any = Field(description="The text (rolling) or the summary (session); None when rejected.")
    model: str | None
    prompt_version: str | None
    reason: str | None = Field(description="Why an LLM answer was refused.")
    upto: int | None = Field(description="Rolling: the turns it covers.")
    at: str


class SessionMessage(BaseModel):
    id: str = Field(description="The caller's message id.")
    role: str
    user: str
    channel: str | None
    at: str
    number: int
    text: str


class SessionDetail(SessionRow):
    being: str
    versions: list[SummaryVersion] = Field(
        description="Every rolling summary and session summary of the session (and refused answers), newest first."
    )
    messages: list[SessionMessage] = Field(
        description=f"Its messages in order (the first {MAX_SESSION_MESSAGES_SHOWN})."
    )


class ConversationState(BaseModel):
    """Spec 004's SessionState of one user: where the conversation with them stands."""

    user: str
    message_count: int = Field(description="Messages over all sessions (both roles).")
    last_interaction: str | None = Field(description="The time of the latest message.")
    last_user_message: str | None = Field(description="The user's latest message, cleaned and truncated.")
    open_session: str | None = Field(description="The open session's id; None when none is open.")
    open_turns: int = Field(description="Messages in the open session so far.")
    spine_version: int = Field(description="The summary spine's latest version (0: none yet).")


class SessionList(BaseModel):
    being: str
    sessions: list[SessionRow]
    state: ConversationState | None = Field(
        None, description="With a user: where the conversation with them stands (spec 004's SessionState)."
    )


class ConversationContext(BaseModel):
    """What a context with a `user` adds: where the conversation with them stands."""

    user: str
    state: ConversationState | None = Field(description="None before the user's first message.")
    last_session: dict[str, Any] | None = Field(
        description="The latest session summary: its session and summary."
    )
    rolling: str | None = Field(description="The rolling summary of the open session, if any.")
    spine: dict[str, list[str]] | None = Field(
        description="The current summary spine (PROFILE, PROJECTS, PEOPLE, OPEN_LOOPS)."
    )
    history: dict[str, Any] | None = Field(
        None,
        description="The latest session as a client replays it once compacted (ADR 0067): `marker` and "
        "`synthesis` for the compacted part, then the preserved `messages`; None until compacted.",
    )
    text: str = Field(description="The three rendered, for a prompt (and the compacted history).")


def _row(s: dict[str, Any]) -> SessionRow:
    return SessionRow(
        id=s["id"],
        user=s["user_id"],
        ordinal=s["ordinal"],
        started_at=s["started_at"],
        last_at=s["last_at"],
        ended_at=s["ended_at"],
        close_reason=s["close_reason"],
        closed_seen_at=s["closed_seen_at"],
        turns=s["turns"],
        summary=json.loads(s["summary_json"]) if s["summary_json"] else None,
        summary_method=s["summary_method"],
        rolling=s["rolling_text"],
        rolling_method=s["rolling_method"],
    )


def _version(r: dict[str, Any]) -> SummaryVersion:
    content: Any = r["content"]
    if content is not None and r["kind"] != "rolling":
        content = json.loads(content)
    return SummaryVersion(
        kind=r["kind"],
        version=r["version"],
        method=r["method"],
        content=content,
        model=r["model"],
        prompt_version=r["prompt_version"],
        reason=r["reason"],
        upto=r["upto"],
        at=r["at"],
    )


class Sessions:
    def __init__(self, engram: Engram) -> None:
        self.e = engram

    def _being(self, being_ref: str) -> UUID:
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=["beings", "conversations"], being=being_id)
        return being_id

    def list(self, being_ref: str, *, user: str | None = None, limit: int = DEFAULT_SESSIONS) -> SessionList:
        """The being's sessions (with `user` only), the latest first."""
        being_id = self._being(being_ref)
        reads = self.e.views.conversations
        found = reads.sessions(being_id, user=user, limit=limit)
        state = conversation_state(reads, being_id, user) if user is not None else None
        return SessionList(being=self._name(being_id), sessions=[_row(s) for s in found], state=state)

    def _name(self, being_id: UUID) -> str:
        row = self.e.views.read.being(being_id)
        return str(row["name"]) if row is not None else str(being_id)

    def show(self, session_id: str, being_ref: str | None = None) -> SessionDetail:
        """One session in full: its times, turns, close reason, summary, every summary version and
        its messages. Without `being_ref`, the being whose session it is (the CLI's `sessions show`)."""
        try:
            UUID(session_id)
        except ValueError:
            raise NotFound(f"session {session_id} not found") from None
        candidates = [being_ref] if being_ref is not None else [b["id"] for b in list_beings(self.e.store)]
        for ref in candidates:
            being_id = self._being(ref)
            reads = self.e.views.conversations
            s = reads.session(being_id, session_id)
            if s is None:
                continue
            versions = [
                _version(r)
                for r in reads.summaries(being_id, session_id=session_id, limit=100)
                if r["kind"] in ("rolling", "session")
            ]
            messages = [
                SessionMessage(
                    id=m["message_key"],
                    role=m["role"],
                    user=m["user_id"],
                    channel=m["channel"],
                    at=m["at"],
                    number=m["number"],
                    text=m["text"],
                )
                for m in reads.session_messages(being_id, session_id, limit=MAX_SESSION_MESSAGES_SHOWN)
            ]
            return SessionDetail(
                **_row(s).model_dump(), being=self._name(being_id), versions=versions, messages=messages
            )
        raise NotFound(f"session {session_id} not found")


def conversation_state(reads: ConversationReads, being_id: UUID, user: str) -> ConversationState | None:
    row = reads.conversation(being_id, user)
    if row is None:
        return None
    return ConversationState(
        user=user,
        message_count=row["message_count"],
        last_interaction=row["last_interaction"],
        last_user_message=row["last_user_message"],
        open_session=row["open_session_id"],
        open_turns=row["open_turns"],
        spine_version=row["spine_version"],
    )


def conversation_context(
    reads: ConversationReads,
    being_id: UUID,
    user: str,
    history: dict[str, Any] | None = None,
    history_text: str | None = None,
) -> ConversationContext:
    """The latest session summary, the open session's rolling summary and the current spine of the
    being's conversation with `user` (each None when there is none yet); `history`: its latest
    session once compacted, shown after them as `history_text`."""
    conversation = reads.conversation(being_id, user)
    last = reads.latest_summarized_session(being_id, user)
    last_session = (
        {
            "session_id": last["id"],
            "started_at": last["started_at"],
            "ended_at": last["ended_at"],
            "summary": json.loads(last["summary_json"]),
            "method": last["summary_method"],
        }
        if last is not None
        else None
    )
    rolling = None
    spine = None
    if conversation is not None:
        if conversation["open_session_id"] is not None:
            open_session = reads.session(being_id, conversation["open_session_id"])
            rolling = open_session["rolling_text"] if open_session is not None else None
        latest = reads.latest_spine(being_id, conversation["id"])
        spine = json.loads(latest["content"]) if latest is not None else None
    return ConversationContext(
        user=user,
        state=conversation_state(reads, being_id, user),
        last_session=last_session,
        rolling=rolling,
        spine=spine,
        history=history,
        text=render_conversation(user, last_session, rolling, spine)
        + (f"\n## This session, compacted\n{history_text}" if history_text else ""),
    )


def render_conversation(
    user: str, last: dict[str, Any] | None, rolling: str | None, spine: dict[str, list[str]] | None
) -> str:
    lines = [f"# Your conversation with {user}"]
    if spine:
        for section, items in spine.items():
            if items:
                lines += [f"## {section.replace('_', ' ').capitalize()}", *(f"- {i}" for i in items)]
    if last is not None:
        summary = last["summary"]
        lines += [f"## Last session ({last['started_at'][:10]})", summary["one_liner"]]
        for key, title in (
            ("what_mattered", "What mattered"),
            ("open_loops", "Still open"),
            ("commitments", "Promised"),
        ):
            if summary[key]:
                lines += [f"{title}:", *(f"- {i}" for i in summary[key])]
    if rolling:
        lines += ["## This session so far", rolling]
    if len(lines) == 1:
        lines.append("Nothing yet: no summary of a session with them.")
    return "\n".join(lines)
