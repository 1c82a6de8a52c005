"""Notes: the intake. A scene note becomes a memory node in patrol (❶)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition, PayloadTooLarge
from engram.domain.scene import (
    MAX_SCENE_TEXT_BYTES,
    ParseFailure,
    SceneInput,
    parse_scene_text,
    validate_scene_object,
)
from engram.domain.text import check_text

MAX_NOTE_TEXT_BYTES = MAX_SCENE_TEXT_BYTES
MAX_IDEMPOTENCY_KEY_CHARS = 200
MAX_SOURCE_REF_CHARS = 500


class NoteKind(StrEnum):
    """What a note is; where it goes (spec 000, "Context Structure"): a scene becomes a memory node in
    patrol; rules, preferences, relationships, tools and map entries are the persona's system prompt
    (block 1-A); to-dos, reminders and knowledge its snapshot (block 1-B)."""

    SCENE = "scene"
    TODO = "todo"
    REMINDER = "reminder"
    KNOWLEDGE = "knowledge"
    RULE = "rule"
    PREFERENCE = "preference"
    RELATIONSHIP = "relationship"
    TOOL = "tool"  # a tool the being can use: its name, what it does, when to reach for it
    MAP = "map"  # an entry of the being's map: a place, a person, a project, and where it stands


class ParseStatus(StrEnum):
    """Where a scene note stands on its way to a node. Other kinds are `not_applicable`."""

    NOT_APPLICABLE = "not_applicable"
    PENDING = "pending"  # parsed, waiting for patrol ❶
    FAILED = "failed"  # the spec's [PARSE_FAILED]: kept for repair
    PROCESSED = "processed"  # became a node


def check_note_text(text: str) -> None:
    if not text.strip():
        raise InvalidInput("a note's text must not be empty")
    # Also the text of a scene that does not parse, which is kept as received (ADR 0029).
    check_text("text", text)
    size = len(text.encode("utf-8"))
    if size > MAX_NOTE_TEXT_BYTES:
        raise PayloadTooLarge(
            f"a note's text has at most {MAX_NOTE_TEXT_BYTES} bytes (UTF-8), got {size}",
            limit=MAX_NOTE_TEXT_BYTES,
            size=size,
        )


def check_note_refs(idempotency_key: str | None, source_ref: str | None) -> None:
    """A note's idempotency key and source reference, as the log keeps them (and derives ids from)."""
    if idempotency_key is not None:
        if not 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY_CHARS:
            raise InvalidInput(f"an idempotency key has 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters")
        check_text("idempotency_key", idempotency_key)
    if source_ref is not None:
        if not 0 < len(source_ref) <= MAX_SOURCE_REF_CHARS:
            raise InvalidInput(f"a source reference has 1 to {MAX_SOURCE_REF_CHARS} characters")
        check_text("source_ref", source_ref)


class Note(BeingScopedAggregate):
    TOPIC = "engram.Note"

    class Event(Aggregate.Event):
        TOPIC = "engram.Note.Event"
        being_id: UUID

    class Noted(Event, Aggregate.Created):
        TOPIC = "engram.Note.Noted"
        class_version = 1
        kind: str
        text: str
        idempotency_key: str | None
        source_ref: str | None

    class ParseFailed(Event):
        TOPIC = "engram.Note.ParseFailed"
        class_version = 1
        reason: str

        def apply(self, note: Note) -> None:
            note.parse_status = ParseStatus.FAILED
            note.parse_error = self.reason

    class Repaired(Event):
        """An LLM turned the unparsable text into a scene (#4); the raw text stays as it was."""

        TOPIC = "engram.Note.Repaired"
        class_version = 1
        scene: dict[str, Any]
        model: str

        def apply(self, note: Note) -> None:
            note.repaired_scene = self.scene
            note.parse_status = ParseStatus.PENDING
            note.parse_error = None
            note.repair_attempts += 1

    class RepairRejected(Event):
        """A repair was attempted and failed; the note stays failed, and is not sent again."""

        TOPIC = "engram.Note.RepairRejected"
        class_version = 1
        reason: str
        model: str

        def apply(self, note: Note) -> None:
            note.repair_attempts += 1

    class Processed(Event):
        TOPIC = "engram.Note.Processed"
        class_version = 1
        node_id: UUID

        def apply(self, note: Note) -> None:
            note.parse_status = ParseStatus.PROCESSED
            note.node_id = self.node_id

    class MarkedRead(Event):
        TOPIC = "engram.Note.MarkedRead"
        class_version = 1

        def apply(self, note: Note) -> None:
            note.read = True

    class MarkedUnread(Event):
        TOPIC = "engram.Note.MarkedUnread"
        class_version = 1

        def apply(self, note: Note) -> None:
            note.read = False

    class Enabled(Event):
        TOPIC = "engram.Note.Enabled"
        class_version = 1

        def apply(self, note: Note) -> None:
            note.enabled = True

    class Disabled(Event):
        TOPIC = "engram.Note.Disabled"
        class_version = 1

        def apply(self, note: Note) -> None:
            note.enabled = False

    def __init__(
        self,
        being_id: UUID,
        kind: str,
        text: str,
        idempotency_key: str | None,
        source_ref: str | None,
    ) -> None:
        self.being_id = being_id
        self.kind: str = NoteKind(kind).value
        self.text = text
        self.idempotency_key = idempotency_key
        self.source_ref = source_ref
        self.read = False
        self.enabled = True
        self.parse_status = (
            ParseStatus.PENDING.value if self.kind == NoteKind.SCENE else ParseStatus.NOT_APPLICABLE.value
        )
        self.parse_error: str | None = None
        self.repaired_scene: dict[str, Any] | None = None
        self.repair_attempts = 0
        self.node_id: UUID | None = None

    @classmethod
    def take(
        cls,
        note_id: UUID,
        being_id: UUID,
        kind: NoteKind | str,
        text: str,
        at: datetime,
        *,
        idempotency_key: str | None = None,
        source_ref: str | None = None,
    ) -> Note:
        """Record a note. A scene note is parsed at once (ADR 0003):

        - a JSON object that breaks the scene schema raises `InvalidScene`;
        - text that is no JSON object is kept, with a `ParseFailed` event.
        """
        try:
            kind = NoteKind(kind)
        except ValueError:
            raise InvalidInput(
                f"unknown note kind {kind!r}; kinds are {', '.join(k.value for k in NoteKind)}"
            ) from None
        check_note_text(text)
        check_note_refs(idempotency_key, source_ref)
        parsed = parse_scene_text(text) if kind == NoteKind.SCENE else None
        note = cls._create(
            cls.Noted,
            id=note_id,
            being_id=being_id,
            kind=kind.value,
            text=text,
            idempotency_key=idempotency_key,
            source_ref=source_ref,
            timestamp=at,
        )
        if isinstance(parsed, ParseFailure):
            note._emit(cls.ParseFailed, at, reason=parsed.reason)
        return note

    def same_request(self, kind: str, text: str, source_ref: str | None) -> bool:
        """Whether a replayed idempotent request carries the same content as this note."""
        return (self.kind, self.text, self.source_ref) == (kind, text, source_ref)

    def scene_input(self) -> SceneInput | ParseFailure:
        """The scene this note holds: the repaired one if an LLM repaired it, else the parsed text."""
        if self.kind != NoteKind.SCENE:
            raise InvalidTransition(f"a {self.kind} note holds no scene")
        if self.repaired_scene is not None:
            return validate_scene_object(self.repaired_scene)
        return parse_scene_text(self.text)

    def mark_read(self, at: datetime) -> None:
        if not self.read:
            self._emit(self.MarkedRead, at)

    def mark_unread(self, at: datetime) -> None:
        if self.read:
            self._emit(self.MarkedUnread, at)

    def enable(self, at: datetime) -> None:
        if not self.enabled:
            self._emit(self.Enabled, at)

    def disable(self, at: datetime) -> None:
        if self.enabled:
            self._emit(self.Disabled, at)

    def fail_parse(self, reason: str, at: datetime) -> None:
        self._require_scene_awaiting()
        self._emit(self.ParseFailed, at, reason=reason)

    def repair(self, scene: SceneInput, model: str, at: datetime) -> None:
        if self.parse_status != ParseStatus.FAILED:
            raise InvalidTransition("only a note that failed to parse is repaired")
        self._emit(self.Repaired, at, scene=scene.model_dump(mode="json", exclude_none=True), model=model)

    def reject_repair(self, reason: str, model: str, at: datetime) -> None:
        if self.parse_status != ParseStatus.FAILED:
            raise InvalidTransition("only a note that failed to parse is repaired")
        self._emit(self.RepairRejected, at, reason=reason, model=model)

    def mark_processed(self, node_id: UUID, at: datetime) -> None:
        self._require_scene_awaiting()
        if self.parse_status == ParseStatus.FAILED:
            raise InvalidTransition("a note that failed to parse does not become a node")
        self._emit(self.Processed, at, node_id=node_id)

    def _require_scene_awaiting(self) -> None:
        if self.kind != NoteKind.SCENE:
            raise InvalidTransition(f"a {self.kind} note does not become a node")
        if self.parse_status == ParseStatus.PROCESSED:
            raise InvalidTransition("this note already became a node")
