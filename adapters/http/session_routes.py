"""`/v1/beings/{being}/sessions`: a being's conversation sessions and their summaries (issue #10,
ADR 0053). Read-only; registered on the `/v1` router by `routes`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.routes import v1
from engram.domain.message import MAX_USER_CHARS
from engram.services.sessions import DEFAULT_SESSIONS, MAX_SESSIONS, SessionDetail, SessionList


@v1.get("/beings/{being}/sessions", name="list_sessions", response_model=SessionList, tags=["conversations"])
def list_sessions(
    being: Being,
    engram: EngramDep,
    user: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_USER_CHARS, description="Only the sessions with this user."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SESSIONS)] = DEFAULT_SESSIONS,
) -> SessionList:
    """The being's sessions, the latest first: times, turns, close reason, latest summary and
    rolling summary."""
    return engram.sessions.list(being.ref, user=user, limit=limit)


@v1.get(
    "/beings/{being}/sessions/{session_id}",
    name="show_session",
    response_model=SessionDetail,
    tags=["conversations"],
)
def show_session(session_id: str, being: Being, engram: EngramDep) -> SessionDetail:
    """One session: its times, turns, close reason, summary, every version of its rolling summary and
    summary (refused LLM answers too) and its messages."""
    return engram.sessions.show(session_id, being.ref)
