"""Lifecycle notes through the Python API (`engram.notes.take`) on both backends: what a note keeps,
the inputs refused naming their field with nothing written, and idempotent replays (ADR 0046)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import engram as engram_api
from engram.domain.errors import InvalidInput
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput, invalid_input_of
from engram.services.errors import IdempotencyConflict
from tests.lifecycle_cases import bad_lifecycles, names_field
from tests.support import SteppingClock


def test_a_lifecycle_note_keeps_its_fields(engram: Engram, clock: SteppingClock) -> None:
    engram.beings.register("Aria")
    at = clock.current - timedelta(hours=2)
    taken = engram.notes.take(
        "Aria",
        NoteInput(
            kind="log",
            text="Nightly import ran",
            stability="volatile",
            ttl_days=30,
            sensitivity="sensitive",
            confidence=0.9,
            evidence=["job 42 exit 0"],
            tags=["jobs", " jobs ", "nightly"],
            scope="ops",
            subject="import",
            job_id="job-42",
            at=at,
        ),
    )
    assert (taken.stability, taken.sensitivity) == ("volatile", "sensitive")
    assert taken.expires_at == (at + timedelta(days=30)).isoformat()
    [row] = engram.listing.notes("Aria", include_sensitive=True)
    assert row.tags == ["jobs", "nightly"] and row.evidence == ["job 42 exit 0"]
    assert (row.scope, row.subject, row.job_id, row.confidence) == ("ops", "import", "job-42", 0.9)
    assert datetime.fromisoformat(row.at) == at
    # A soul is permanent by default, a note stable.
    assert engram.notes.take("Aria", NoteInput(kind="soul", text="Calm.")).stability == "permanent"
    assert engram.notes.take("Aria", NoteInput(kind="todo", text="x")).stability == "stable"


@bad_lifecycles()
def test_bad_lifecycles_are_refused_naming_the_field(
    engram: Engram, fields: dict[str, Any], field: str
) -> None:
    """`NoteInput` refuses a malformed field itself (pydantic); the rules of spec 002 are the domain's
    (`InvalidInput` at intake). Either way the field is named and nothing is written."""
    engram.beings.register("Aria")
    head = engram.store.head()
    with pytest.raises((InvalidInput, ValidationError)) as refused:
        engram.notes.take("Aria", NoteInput(text="x", **fields))
    error = refused.value
    if isinstance(error, ValidationError):
        error = invalid_input_of(error)
    named = [str(error.details.get("field", ""))] + [e["field"] for e in error.details.get("errors", [])]
    assert names_field(field, named), (error.message, named)
    assert engram.store.head() == head


def test_idempotent_replays_compare_the_lifecycle(engram: Engram, clock: SteppingClock) -> None:
    engram.beings.register("Aria")
    at = clock.current - timedelta(days=1)
    base: dict[str, Any] = {
        "kind": "reminder",
        "text": "Bins out",
        "idempotency_key": "bins",
        "stability": "volatile",
        "ttl_days": 7,
        "tags": ["home"],
        "at": at,
    }
    first = engram.notes.take("Aria", NoteInput(**base))
    again = engram.notes.take("Aria", NoteInput(**base))
    assert again.duplicate and again.note_id == first.note_id
    # A replay without `at` is the same request: it meant "when it is taken".
    without_at = {k: v for k, v in base.items() if k != "at"}
    assert engram.notes.take("Aria", NoteInput(**without_at)).duplicate
    head = engram.store.head()
    for other in (
        {"ttl_days": 8},
        {"tags": ["garden"]},
        {"sensitivity": "sensitive"},
        {"at": at - timedelta(hours=1)},
    ):
        with pytest.raises(IdempotencyConflict):
            engram.notes.take("Aria", NoteInput(**{**base, **other}))
    assert engram.store.head() == head


def test_the_python_api_takes_lifecycle_notes(tmp_path: Path) -> None:
    with engram_api.open(tmp_path / "data", embedder="hashing", llm="none") as memory:
        memory.beings.register("Aria")
        taken = memory.notes.take(
            "Aria", engram_api.NoteInput(kind="log", text="Deployed", stability="volatile", ttl_days=7)
        )
        assert taken.stability == "volatile"
        assert taken.expires_at is not None
        expires = datetime.fromisoformat(taken.expires_at)
        assert timedelta(days=6.9) < expires - datetime.now(UTC) <= timedelta(days=7)
        assert [n.text for n in memory.listing.notes("Aria", kinds=["log"])] == ["Deployed"]


def test_a_note_recorded_before_the_lifecycle_replays_as_it_was(engram: Engram) -> None:
    """A `Note.Noted` version 1 record, as the code before ADR 0046 wrote it, upcasts to a stable,
    normal note of scope `user` that never expires and happened when it was taken; the notes view
    (rebuilt too) lists it as active."""
    from uuid import UUID

    from eventsourcing.persistence import Mapper, StoredEvent

    from engram.domain.note import Note

    engram.beings.register("Aria")
    taken = engram.notes.take("Aria", NoteInput(kind="todo", text="Renew the passport"))
    note = engram.store.get(Note, UUID(taken.note_id))
    # The event in clear, as a log written before encryption holds it (ADR 0074).
    mapper = Mapper(transcoder=engram.store.app.mapper.transcoder)
    rewritten = Note.take(note.id, note.being_id, "todo", "Water the beds", note.at)
    [noted] = rewritten.collect_events()
    stored = mapper.to_stored_event(noted)
    state = mapper.transcoder.decode(stored.state)
    assert state.pop("class_version") == 2
    for field in (
        "stability", "ttl_days", "expires_at", "sensitivity", "confidence", "evidence", "tags", "scope",
        "subject", "job_id", "at",
    ):  # fmt: skip
        del state[field]
    other = mapper.transcoder.decode(stored.state)["timestamp"]
    v1_id = UUID(int=note.id.int ^ 1)
    state["originator_id"] = v1_id
    v1 = StoredEvent(
        originator_id=v1_id, originator_version=1, topic=stored.topic, state=mapper.transcoder.encode(state)
    )
    assert b"stability" not in v1.state and b"class_version" not in v1.state
    engram.store.app.recorder.insert_events([v1])

    old = engram.store.get(Note, v1_id)
    assert (old.kind, old.text, old.stability, old.sensitivity, old.scope) == (
        "todo",
        "Water the beds",
        "stable",
        "normal",
        "user",
    )
    assert (old.ttl_days, old.expires_at, old.tags, old.evidence, old.confidence) == (None, None, [], [], 1.0)
    assert old.at == other and old.is_active(other + timedelta(days=36_500))
    for rebuild in (False, True):
        if rebuild:
            engram.views.rebuild("notes")
        listed = {n.id: n for n in engram.listing.notes("Aria")}
        assert listed[str(v1_id)].state == "active" and listed[str(v1_id)].stability == "stable"
