"""Notes: the intake, and the lifecycle of spec 002 (ADR 0046).

A scene note becomes a memory node in patrol (❶). Every note has a stability, may expire (its
`expires_at` is fixed when it is taken), may be superseded by another note of its being, and may be
the summary that merged others. Expired and superseded are states, not deletions: the note and its
history stay in the log and in the view.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.embedding import Embedding
from engram.domain.errors import EmbeddingMismatch, InvalidInput, InvalidTransition, PayloadTooLarge
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
MAX_TTL_DAYS = 36_525  # a hundred years: longer is a mistake, not a time to live
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_EVIDENCE = 20
MAX_EVIDENCE_CHARS = 1_000
MAX_LABEL_CHARS = 200  # scope, subject, job id
MIN_RULE_CONFIDENCE = 0.8
MAX_AT_AHEAD = timedelta(hours=1)  # `at` is when something happened: a little clock skew, no future
DEFAULT_SCOPE = "user"


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
    LOG = "log"  # spec 002: a raw record of a request or a system event
    SUMMARY = "summary"  # spec 002: what a job or a session came to; also what a merge writes
    SOUL = "soul"  # spec 002: the being's identity and principles; a new one supersedes the last


class Stability(StrEnum):
    """How long a note is meant to live (spec 002)."""

    VOLATILE = "volatile"  # short-term: needs a time to live
    STABLE = "stable"  # the default: lives until it expires (if given a TTL) or is superseded
    PERMANENT = "permanent"  # never expires


class Sensitivity(StrEnum):
    """A sensitive note never enters a prompt: no pack, context, recall or MCP answer (ADR 0046)."""

    NORMAL = "normal"
    SENSITIVE = "sensitive"


class SupersedeReason(StrEnum):
    MANUAL = "manual"  # `engram notes supersede OLD --by NEW`
    SOUL = "soul"  # a new soul note replaced the being's current one
    MERGE = "merge"  # a merge summarised this note


class MergeMethod(StrEnum):
    LLM = "llm"  # the summary is an LLM's answer (model and prompt version recorded)
    CONCATENATION = "concatenation"  # no LLM: the notes' texts joined, marked as such


class ParseStatus(StrEnum):
    """Where a scene note stands on its way to a node. Other kinds are `not_applicable`."""

    NOT_APPLICABLE = "not_applicable"
    PENDING = "pending"  # parsed, waiting for patrol ❶
    FAILED = "failed"  # the spec's [PARSE_FAILED]: kept for repair
    PROCESSED = "processed"  # became a node


def note_kind(kind: NoteKind | str) -> NoteKind:
    try:
        return NoteKind(kind)
    except ValueError:
        raise InvalidInput(
            f"unknown note kind {kind!r}; kinds are {', '.join(k.value for k in NoteKind)}", field="kind"
        ) from None


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


def _label(field: str, value: str | None) -> None:
    if value is None:
        return
    if not 0 < len(value) <= MAX_LABEL_CHARS or not value.strip():
        raise InvalidInput(f"{field} has 1 to {MAX_LABEL_CHARS} characters, not only spaces", field=field)
    check_text(field, value)


def _clean_tags(tags: list[str]) -> list[str]:
    """Tags trimmed, in their order, each once."""
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"a note has at most {MAX_TAGS} tags, got {len(tags)}", field="tags")
    clean: list[str] = []
    for i, tag in enumerate(tags):
        check_text(f"tags.{i}", tag)
        tag = tag.strip()
        if not 0 < len(tag) <= MAX_TAG_CHARS:
            raise InvalidInput(f"tags.{i}: a tag has 1 to {MAX_TAG_CHARS} characters", field=f"tags.{i}")
        if tag not in clean:
            clean.append(tag)
    return clean


def _check_evidence(evidence: list[str]) -> None:
    if len(evidence) > MAX_EVIDENCE:
        raise InvalidInput(f"a note has at most {MAX_EVIDENCE} pieces of evidence", field="evidence")
    for i, item in enumerate(evidence):
        check_text(f"evidence.{i}", item)
        if not item.strip() or len(item) > MAX_EVIDENCE_CHARS:
            raise InvalidInput(
                f"evidence.{i}: a piece of evidence has 1 to {MAX_EVIDENCE_CHARS} characters",
                field=f"evidence.{i}",
            )


class Lifecycle:
    """What spec 002 adds to a note, checked against its rules for a new note.

    `expires_at` is `at + ttl_days`: counted from when the thing happened, not from when Engram was
    told (ADR 0046), so an old log imported with its TTL may arrive already expired.
    """

    __slots__ = (
        "at",
        "confidence",
        "evidence",
        "expires_at",
        "job_id",
        "scope",
        "sensitivity",
        "stability",
        "subject",
        "tags",
        "ttl_days",
    )

    def __init__(
        self,
        kind: NoteKind,
        received_at: datetime,
        *,
        stability: Stability | str | None = None,
        ttl_days: float | None = None,
        sensitivity: Sensitivity | str = Sensitivity.NORMAL,
        confidence: float = 1.0,
        evidence: list[str] | None = None,
        tags: list[str] | None = None,
        scope: str = DEFAULT_SCOPE,
        subject: str | None = None,
        job_id: str | None = None,
        at: datetime | None = None,
    ) -> None:
        if stability is None:
            stability = Stability.PERMANENT if kind == NoteKind.SOUL else Stability.STABLE
        try:
            self.stability = Stability(stability)
        except ValueError:
            raise InvalidInput(
                f"unknown stability {stability!r}; it is one of {', '.join(s.value for s in Stability)}",
                field="stability",
            ) from None
        try:
            self.sensitivity = Sensitivity(sensitivity)
        except ValueError:
            raise InvalidInput(
                f"unknown sensitivity {sensitivity!r}; it is one of "
                f"{', '.join(s.value for s in Sensitivity)}",
                field="sensitivity",
            ) from None
        if ttl_days is not None:
            if isinstance(ttl_days, bool) or not math.isfinite(ttl_days) or ttl_days <= 0:
                raise InvalidInput("ttl_days is a number of days above 0", field="ttl_days")
            if ttl_days > MAX_TTL_DAYS:
                raise InvalidInput(f"ttl_days is at most {MAX_TTL_DAYS} (a hundred years)", field="ttl_days")
        if self.stability == Stability.VOLATILE and ttl_days is None:
            raise InvalidInput("a volatile note needs ttl_days", field="ttl_days")
        if self.stability == Stability.PERMANENT and ttl_days is not None:
            raise InvalidInput("a permanent note never expires: give it no ttl_days", field="ttl_days")
        if kind == NoteKind.SOUL and self.stability != Stability.PERMANENT:
            raise InvalidInput("a soul note is permanent: its stability is permanent", field="stability")
        if isinstance(confidence, bool) or not (math.isfinite(confidence) and 0.0 <= confidence <= 1.0):
            raise InvalidInput("confidence is a number from 0 to 1", field="confidence")
        evidence = list(evidence or [])
        _check_evidence(evidence)
        if kind == NoteKind.RULE:
            if confidence < MIN_RULE_CONFIDENCE:
                raise InvalidInput(
                    f"a rule needs confidence {MIN_RULE_CONFIDENCE} or more, got {confidence}",
                    field="confidence",
                )
            if not evidence:
                raise InvalidInput("a rule needs at least one piece of evidence", field="evidence")
        _label("scope", scope)
        _label("subject", subject)
        _label("job_id", job_id)
        if at is None:
            at = received_at
        elif at.tzinfo is None:
            raise InvalidInput("at needs a time zone (e.g. 2026-05-02T10:00:00+00:00)", field="at")
        elif at > received_at + MAX_AT_AHEAD:
            raise InvalidInput("at is when the note's event happened: it cannot be in the future", field="at")
        self.ttl_days = float(ttl_days) if ttl_days is not None else None
        self.expires_at = at + timedelta(days=self.ttl_days) if self.ttl_days is not None else None
        self.confidence = float(confidence)
        self.evidence = evidence
        self.tags = _clean_tags(list(tags or []))
        self.scope = scope
        self.subject = subject
        self.job_id = job_id
        self.at = at

    def fields(self) -> dict[str, Any]:
        """The fields of `Note.Noted` this adds."""
        return {
            "stability": self.stability.value,
            "ttl_days": self.ttl_days,
            "expires_at": self.expires_at,
            "sensitivity": self.sensitivity.value,
            "confidence": self.confidence,
            "evidence": list(self.evidence),  # each event its own lists: a lifecycle may serve several
            "tags": list(self.tags),
            "scope": self.scope,
            "subject": self.subject,
            "job_id": self.job_id,
            "at": self.at,
        }


class Note(BeingScopedAggregate):
    TOPIC = "engram.Note"

    class Event(Aggregate.Event):
        TOPIC = "engram.Note.Event"
        being_id: UUID

    class Noted(Event, Aggregate.Created):
        """Version 2 adds spec 002's lifecycle (ADR 0046). A version 1 note replays as what it was: a
        stable, normal note of scope `user` that never expires, happened when it was taken."""

        TOPIC = "engram.Note.Noted"
        class_version = 2
        kind: str
        text: str
        idempotency_key: str | None
        source_ref: str | None
        stability: str
        ttl_days: float | None
        expires_at: datetime | None
        sensitivity: str
        confidence: float
        evidence: list[str]
        tags: list[str]
        scope: str
        subject: str | None
        job_id: str | None
        at: datetime

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(
                stability=Stability.STABLE.value,
                ttl_days=None,
                expires_at=None,
                sensitivity=Sensitivity.NORMAL.value,
                confidence=1.0,
                evidence=[],
                tags=[],
                scope=DEFAULT_SCOPE,
                subject=None,
                job_id=None,
                at=state["timestamp"],
            )

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

    class Embedded(Event):
        """The note's vector (ADR 0049), in an event as a node's is, so that a rebuild of the notes'
        search view never calls an embedder. Recorded for non-scene notes that are not sensitive."""

        TOPIC = "engram.Note.Embedded"
        class_version = 1
        embedding: Embedding

        def apply(self, note: Note) -> None:
            note.embedding = self.embedding

    class Reembedded(Embedded):
        """A vector of another model replacing the note's (`engram embeddings migrate`, ADR 0071)."""

        TOPIC = "engram.Note.Reembedded"
        class_version = 1

    class Expired(Event):
        """The worker saw the note's `expires_at` pass. The event's timestamp is that clock reading;
        reads never waited for it (they compare `expires_at` with their own now)."""

        TOPIC = "engram.Note.Expired"
        class_version = 1
        expires_at: datetime

        def apply(self, note: Note) -> None:
            note.expired = True

    class Superseded(Event):
        """Another note of the being replaces this one (`by`): a manual supersede, a new soul, a merge."""

        TOPIC = "engram.Note.Superseded"
        class_version = 1
        by: UUID
        reason: str

        def apply(self, note: Note) -> None:
            note.superseded_by = self.by

    class Supersedes(Event):
        """The other side of `Superseded`, on the note that replaces: both notes change in one
        transaction, so two crossing supersedes cannot both win and make a cycle."""

        TOPIC = "engram.Note.Supersedes"
        class_version = 1
        old: UUID
        reason: str

        def apply(self, note: Note) -> None:
            note.supersedes.append(self.old)

    class SupersedeUndone(Event):
        """An undo (ADR 0072): this note is no longer superseded by `by`; it is live again."""

        TOPIC = "engram.Note.SupersedeUndone"
        class_version = 1
        undo_id: UUID
        by: UUID

        def apply(self, note: Note) -> None:
            note.superseded_by = None

    class SupersedesUndone(Event):
        """The other side of `SupersedeUndone`, on the note that had replaced `old`."""

        TOPIC = "engram.Note.SupersedesUndone"
        class_version = 1
        undo_id: UUID
        old: UUID

        def apply(self, note: Note) -> None:
            note.supersedes = [n for n in note.supersedes if n != self.old]

    class Merged(Event):
        """This note (a summary) is the merge of `sources`, which are superseded by it in the same
        transaction. An LLM merge records its model, prompt version and capped answer; a merge whose
        LLM answer was refused is a concatenation that keeps that answer and why (`refused`, ADR 0048)."""

        TOPIC = "engram.Note.Merged"
        class_version = 1
        sources: list[UUID]
        method: str
        model: str | None
        prompt_version: str | None
        answer: str | None
        refused: str | None

        def apply(self, note: Note) -> None:
            note.merged_from = list(self.sources)

    def __init__(
        self,
        being_id: UUID,
        kind: str,
        text: str,
        idempotency_key: str | None,
        source_ref: str | None,
        stability: str,
        ttl_days: float | None,
        expires_at: datetime | None,
        sensitivity: str,
        confidence: float,
        evidence: list[str],
        tags: list[str],
        scope: str,
        subject: str | None,
        job_id: str | None,
        at: datetime,
    ) -> None:
        self.being_id = being_id
        self.kind: str = NoteKind(kind).value
        self.text = text
        self.idempotency_key = idempotency_key
        self.source_ref = source_ref
        self.stability = stability
        self.ttl_days = ttl_days
        self.expires_at = expires_at
        self.sensitivity = sensitivity
        self.confidence = confidence
        self.evidence = list(evidence)
        self.tags = list(tags)
        self.scope = scope
        self.subject = subject
        self.job_id = job_id
        self.at = at
        self.expired = False  # recorded by the worker; `is_active` does not wait for it
        self.superseded_by: UUID | None = None
        self.supersedes: list[UUID] = []
        self.merged_from: list[UUID] = []
        self.read = False
        self.enabled = True
        self.parse_status = (
            ParseStatus.PENDING.value if self.kind == NoteKind.SCENE else ParseStatus.NOT_APPLICABLE.value
        )
        self.parse_error: str | None = None
        self.repaired_scene: dict[str, Any] | None = None
        self.repair_attempts = 0
        self.node_id: UUID | None = None
        self.embedding: Embedding | None = None  # for the context pack's search (ADR 0049)

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
        lifecycle: Lifecycle | None = None,
    ) -> Note:
        """Record a note. A scene note is parsed at once (ADR 0003):

        - a JSON object that breaks the scene schema raises `InvalidScene`;
        - text that is no JSON object is kept, with a `ParseFailed` event.

        `lifecycle` defaults to a stable, normal note that happened `at` (a soul: permanent).
        """
        kind = note_kind(kind)
        check_note_text(text)
        check_note_refs(idempotency_key, source_ref)
        if lifecycle is None:
            lifecycle = Lifecycle(kind, at)
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
            **lifecycle.fields(),
        )
        if isinstance(parsed, ParseFailure):
            note._emit(cls.ParseFailed, at, reason=parsed.reason)
        return note

    @staticmethod
    def check_merge(sources: list[Note]) -> None:
        """Why `sources` cannot be merged, raised; a caller checks before it asks an LLM for the text."""
        if len(sources) < 2:
            raise InvalidInput("a merge takes two notes or more", field="ids")
        being_id = sources[0].being_id
        if any(s.being_id != being_id for s in sources):
            raise InvalidInput("a merge takes notes of one being", field="ids")
        if len({s.id for s in sources}) != len(sources):
            raise InvalidInput("a merge takes each note once", field="ids")
        for s in sources:
            if s.superseded_by is not None:
                raise InvalidTransition(f"note {s.id} is already superseded by {s.superseded_by}")
            if s.kind == NoteKind.SCENE:
                raise InvalidInput(
                    f"note {s.id} is a scene: scenes become memories, and patrol consolidates those",
                    field="ids",
                )

    @classmethod
    def merge(
        cls,
        note_id: UUID,
        sources: list[Note],
        text: str,
        at: datetime,
        *,
        method: MergeMethod,
        model: str | None = None,
        prompt_version: str | None = None,
        answer: str | None = None,
        refused: str | None = None,
    ) -> Note:
        """A `summary` note made of two or more notes of one being, each superseded by it (`Merged`
        on the summary, `Superseded` on each source, all saved together).

        The summary lives as long as the longest-lived source: stable, expiring at the latest of their
        `expires_at` (never if one never expires); it is sensitive if one of them is (ADR 0046).
        """
        cls.check_merge(sources)
        being_id = sources[0].being_id
        if model is not None and method == MergeMethod.CONCATENATION:
            raise InvalidInput("a concatenation has no model")
        check_note_text(text)
        expiries = [s.expires_at for s in sources]
        expires_at = None if any(e is None for e in expiries) else max(e for e in expiries if e)
        sensitive = any(s.sensitivity == Sensitivity.SENSITIVE for s in sources)
        tags: list[str] = []
        for s in sources:
            tags.extend(t for t in s.tags if t not in tags)
        evidence: list[str] = []
        for s in sources:
            evidence.extend(e for e in s.evidence if e not in evidence)
        scopes = {s.scope for s in sources}
        summary = cls._create(
            cls.Noted,
            id=note_id,
            being_id=being_id,
            kind=NoteKind.SUMMARY.value,
            text=text,
            idempotency_key=None,
            source_ref=None,
            timestamp=at,
            stability=Stability.STABLE.value,
            ttl_days=None,
            expires_at=expires_at,
            sensitivity=(Sensitivity.SENSITIVE if sensitive else Sensitivity.NORMAL).value,
            confidence=min(s.confidence for s in sources),
            evidence=evidence[:MAX_EVIDENCE],
            tags=tags[:MAX_TAGS],
            scope=scopes.pop() if len(scopes) == 1 else DEFAULT_SCOPE,
            subject=None,
            job_id=None,
            at=max(s.at for s in sources),
        )
        summary._emit(
            cls.Merged,
            at,
            sources=[s.id for s in sources],
            method=MergeMethod(method).value,
            model=model,
            prompt_version=prompt_version,
            answer=answer,
            refused=refused,
        )
        for s in sources:
            s._emit(cls.Superseded, at, by=summary.id, reason=SupersedeReason.MERGE.value)
        return summary

    def request_fields(self) -> dict[str, Any]:
        """What an idempotent replay of this note's request must carry the same (`at` only when the
        request gave one: a replay without it is the same request)."""
        return {
            "kind": self.kind,
            "text": self.text,
            "source_ref": self.source_ref,
            "stability": self.stability,
            "ttl_days": self.ttl_days,
            "sensitivity": self.sensitivity,
            "confidence": self.confidence,
            "evidence": list(self.evidence),  # each event its own lists: a lifecycle may serve several
            "tags": list(self.tags),
            "scope": self.scope,
            "subject": self.subject,
            "job_id": self.job_id,
        }

    def same_request(
        self,
        kind: str,
        text: str,
        source_ref: str | None,
        lifecycle: Lifecycle | None = None,
        *,
        given_at: datetime | None = None,
    ) -> bool:
        """Whether a replayed idempotent request carries the same content as this note. `at` counts
        only when the replay gave one: without it, the request means "when it is taken"."""
        if (self.kind, self.text, self.source_ref) != (kind, text, source_ref):
            return False
        if lifecycle is None:
            lifecycle = Lifecycle(NoteKind(kind), self.at)
        theirs = {**lifecycle.fields(), "kind": kind, "text": text, "source_ref": source_ref}
        del theirs["expires_at"], theirs["at"]
        if given_at is not None and given_at != self.at:
            return False
        mine = self.request_fields()
        return all(mine[k] == v for k, v in theirs.items())

    def is_active(self, now: datetime) -> bool:
        """Neither superseded nor past its `expires_at` (whether or not the worker recorded it yet)."""
        return self.superseded_by is None and not self.is_expired(now)

    def is_expired(self, now: datetime) -> bool:
        return self.expired or (self.expires_at is not None and self.expires_at <= now)

    def embed(self, embedding: Embedding, at: datetime) -> None:
        """Record the note's vector for the pack's search. Scenes become nodes (embedded there), and a
        sensitive note never enters a pack: neither is embedded (ADR 0049)."""
        if self.kind == NoteKind.SCENE:
            raise InvalidTransition("a scene note is embedded as the node it becomes")
        if self.sensitivity == Sensitivity.SENSITIVE:
            raise InvalidTransition("a sensitive note never enters a pack: it is not embedded")
        if self.embedding is not None and not self.embedding.same_space(embedding):
            raise EmbeddingMismatch(
                f"note {self.id} holds a {self.embedding.model}/{self.embedding.dim} vector; "
                f"a {embedding.model}/{embedding.dim} vector is not mixed in",
            )
        self._emit(self.Embedded, at, embedding=embedding)

    def reembed(self, embedding: Embedding, at: datetime) -> bool:
        """Replace the vector with one of another model (a migration); False if it has this one's."""
        if self.embedding is not None and self.embedding.same_space(embedding):
            return False
        self._emit(self.Reembedded, at, embedding=embedding)
        return True

    def expire(self, at: datetime) -> None:
        """Record that `expires_at` has passed; `at` is the clock reading that saw it."""
        if self.expired:
            return
        if self.expires_at is None or self.expires_at > at:
            raise InvalidTransition(f"note {self.id} has not expired (expires at {self.expires_at})")
        self._emit(self.Expired, at, expires_at=self.expires_at)

    def supersede(self, by: Note, at: datetime, reason: SupersedeReason = SupersedeReason.MANUAL) -> None:
        """`by` replaces this note. Both must be notes of one being that nothing supersedes yet, so
        a chain never loops; `Supersedes` on `by` makes crossing supersedes conflict on save."""
        if by.id == self.id:
            raise InvalidInput("a note cannot supersede itself", field="by")
        if by.being_id != self.being_id:
            raise InvalidInput("a note is superseded by a note of its own being", field="by")
        if self.superseded_by is not None:
            raise InvalidTransition(f"note {self.id} is already superseded by {self.superseded_by}")
        if by.superseded_by is not None:
            raise InvalidTransition(
                f"note {by.id} is itself superseded by {by.superseded_by}: supersede with the latest"
            )
        if by.is_expired(at):
            raise InvalidTransition(f"note {by.id} has expired: it cannot replace another")
        self._emit(self.Superseded, at, by=by.id, reason=SupersedeReason(reason).value)
        by._emit(self.Supersedes, at, old=self.id, reason=SupersedeReason(reason).value)

    def undo_supersede(self, by: Note, undo_id: UUID, at: datetime) -> None:
        """Reverse `by` replacing this note (ADR 0072): both sides change in one transaction."""
        if self.superseded_by != by.id:
            raise InvalidTransition(f"note {self.id} is not superseded by {by.id}")
        self._emit(self.SupersedeUndone, at, undo_id=undo_id, by=by.id)
        by._emit(self.SupersedesUndone, at, undo_id=undo_id, old=self.id)

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
