"""Helpers of the note lifecycle's tests (ADR 0048)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.domain.note import Note
from engram.services.store import AggregateStore


def old_volatile_note(
    note_id: UUID, being_id: UUID, kind: str, text: str, at: datetime, *, scope: str = "user"
) -> Note:
    """A volatile note without ttl_days, as no intake of this version writes one (ADR 0046): its
    `Noted` event made directly, as a log written before the rule holds it."""
    note: Note = Note._create(
        Note.Noted,
        id=note_id,
        being_id=being_id,
        kind=kind,
        text=text,
        idempotency_key=None,
        source_ref=None,
        timestamp=at,
        stability="volatile",
        ttl_days=None,
        expires_at=None,
        sensitivity="normal",
        confidence=1.0,
        evidence=[],
        tags=[],
        scope=scope,
        subject=None,
        job_id=None,
        at=at,
    )
    return note


def load_together(store: AggregateStore, threads: int = 2) -> dict[int, int]:
    """Make the first `get_many` of each of `threads` threads wait for the others' before it returns:
    every thread then holds the same state before any saves, so all but one save conflict. Returns
    the count of `get_many` calls per thread (a thread that ran again after a conflict shows 2+)."""
    barrier = threading.Barrier(threads, timeout=10)
    calls: dict[int, int] = {}
    real = store.get_many

    def get_many(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        me = threading.get_ident()
        calls[me] = calls.get(me, 0) + 1
        if calls[me] == 1:
            barrier.wait()
        return found

    store.get_many = get_many  # type: ignore[method-assign]
    return calls
