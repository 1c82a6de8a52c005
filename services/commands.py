"""Commands and their results, as pydantic models shared by every interface (CLI, HTTP, MCP, Python)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from engram.domain.errors import InvalidInput
from engram.domain.fact import FactContent
from engram.domain.message import Role
from engram.domain.note import (
    DEFAULT_SCOPE,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_SOURCE_REF_CHARS,
    Lifecycle,
    NoteKind,
    Sensitivity,
    Stability,
)
from engram.domain.text import STORABLE, StorableText

MAX_BATCH_NOTES = 1000
"""Notes per batch command (one transaction). The CLI splits larger files into batches."""

BeingRef = Annotated[str, Field(min_length=1, max_length=100, description="A being's name or id.")]


def invalid_input_of(exc: ValidationError) -> InvalidInput:
    """The `InvalidInput` for a command model that refused what it was given (a `NoteInput` built by
    the CLI or the MCP server): every field and why, never the input itself."""
    errors = [
        {"field": ".".join(str(p) for p in e["loc"]) or "input", "message": e["msg"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]
    summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return InvalidInput(f"invalid input: {summary}", errors=errors)


class Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoteInput(Command):
    kind: NoteKind = NoteKind.SCENE
    text: StorableText = Field(
        min_length=1, description="Raw text; for a scene, a JSON object (kept exactly as received)."
    )
    idempotency_key: Annotated[
        str | None, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS), STORABLE
    ] = None
    source_ref: Annotated[str | None, Field(min_length=1, max_length=MAX_SOURCE_REF_CHARS), STORABLE] = None
    # Spec 002's lifecycle (ADR 0046). Its rules (a volatile note needs ttl_days, a rule evidence…)
    # are the domain's (`Lifecycle`), so that every interface refuses the same inputs the same way.
    stability: Stability | None = Field(
        None, description="volatile | stable | permanent; default stable (a soul: permanent)."
    )
    ttl_days: float | None = Field(None, description="Days the note lives, counted from `at`.")
    sensitivity: Sensitivity = Sensitivity.NORMAL
    confidence: float = 1.0
    evidence: list[StorableText] = []
    tags: list[StorableText] = []
    scope: StorableText = DEFAULT_SCOPE
    subject: Annotated[str | None, STORABLE] = None
    job_id: Annotated[str | None, STORABLE] = None
    at: AwareDatetime | None = Field(None, description="When it happened; default: when it is taken.")

    def lifecycle(self, received_at: datetime) -> Lifecycle:
        return Lifecycle(
            self.kind,
            received_at,
            stability=self.stability,
            ttl_days=self.ttl_days,
            sensitivity=self.sensitivity,
            confidence=self.confidence,
            evidence=list(self.evidence),
            tags=list(self.tags),
            scope=self.scope,
            subject=self.subject,
            job_id=self.job_id,
            at=self.at,
        )


LIFECYCLE_FIELDS = (
    "stability",
    "ttl_days",
    "sensitivity",
    "confidence",
    "evidence",
    "tags",
    "scope",
    "subject",
    "job_id",
    "at",
)
"""`NoteInput`'s lifecycle fields: what an interface passes on beside the text when they are given."""


def given_lifecycle(values: Mapping[str, Any]) -> dict[str, Any]:
    """The lifecycle fields among `values` that were given (not None, not empty), for `NoteInput`;
    the others keep its defaults. A `sensitive` flag (CLI, MCP) is `sensitivity: sensitive`."""
    given = {k: v for k, v in values.items() if k in LIFECYCLE_FIELDS and v is not None and v != ()}
    if values.get("sensitive"):
        given["sensitivity"] = "sensitive"
    return {k: list(v) if isinstance(v, tuple) else v for k, v in given.items()}


MAX_BATCH_MESSAGES = 1000
"""Messages per batch command (one transaction). `messages import` splits larger files into batches."""


class MessageInput(Command):
    """A chat message (issue #10). Every rule beyond the types (lengths, a zone on `at`, not more than a
    day ahead) is the domain's (`check_message`), so that every interface refuses the same inputs."""

    id: Annotated[str, STORABLE] = Field(
        description="The caller's message id: a message is taken once per id."
    )
    user: Annotated[str, STORABLE] = Field(description="Who the conversation is with.")
    text: StorableText = Field(description="The message, kept verbatim.")
    role: Role = Role.USER
    channel: Annotated[str | None, STORABLE] = None
    at: datetime | None = Field(None, description="When it was said (ISO 8601 with a zone); default: now.")
    urgent: bool = False
    priority: int | None = Field(None, description="0 to 10; 8 or more wakes a sleeping being (#12).")


MAX_BATCH_FACTS = 1000
"""Facts per batch command (one transaction)."""


class FactInput(Command):
    """A durable fact (issue #11, ADR 0056). The rules beyond the types (lengths, refs, ranges,
    `general` → `other`) are the domain's (`FactContent`), the same on every interface."""

    text: StorableText = Field(
        description="The fact, one line (3 to 400 characters once whitespace is collapsed)."
    )
    subject: StorableText = Field(description="A user id, `__lore__`, or an entity ref.")
    type: str = Field(
        "other", description="preference | profile | relationship | project | other (general: other)"
    )
    memory_type: str | None = Field(None, description="Spec 004's PROFILE | PEOPLE | PROJECT.")
    entity_type: str | None = Field(None, description="person | place | org | project")
    subtype_fact_type: str | None = Field(
        None, description="fact | preference | relationship | friction | habit"
    )
    memory_key: Annotated[str | None, STORABLE] = Field(
        None,
        description="type|entityType|primaryRef|factType: a fact with the same key is updated, not added.",
    )
    evidence: Annotated[str | None, STORABLE] = None
    source_message_id: Annotated[str | None, STORABLE] = None
    confidence: float = 1.0
    importance: int = Field(1, description="0 trivial, 1 standard, 2 significant, 3 critical.")
    pinned: bool = False
    entity_refs: list[StorableText] = Field([], description="<type>:<slug> refs, e.g. person:john_doe.")
    entity_label: Annotated[str | None, STORABLE] = None
    source: str = "manual"
    source_type: Annotated[str | None, STORABLE] = None
    source_trust: float = 1.0
    source_entity: Annotated[str | None, STORABLE] = None
    channel: Annotated[str | None, STORABLE] = Field(None, description="A ranking hint, never a partition.")

    def content(self) -> FactContent:
        return FactContent(
            self.text,
            self.subject,
            fact_type=self.type,
            memory_type=self.memory_type,
            entity_type=self.entity_type,
            subtype_fact_type=self.subtype_fact_type,
            memory_key=self.memory_key,
            evidence=self.evidence,
            source_message_id=self.source_message_id,
            confidence=self.confidence,
            importance=self.importance,
            pinned=self.pinned,
            entity_refs=list(self.entity_refs),
            entity_label=self.entity_label,
            source=self.source,
            source_type=self.source_type,
            source_trust=self.source_trust,
            source_entity=self.source_entity,
            channel=self.channel,
        )


class Result(BaseModel):
    model_config = ConfigDict(frozen=True)

    position: int | None = Field(
        None, description="Log position of the last event written; None when nothing was written."
    )


class BeingRegistered(Result):
    being_id: str
    name: str
    roots: dict[str, str]


class NoteTaken(Result):
    note_id: str
    being_id: str
    kind: str
    parsed: bool | None = Field(None, description="Scene notes: whether the text parsed as a scene.")
    parse_error: str | None = None
    duplicate: bool = Field(False, description="True when an idempotency key replayed an earlier note.")
    source_ref: str | None = None
    stability: str | None = None
    expires_at: str | None = Field(None, description="When the note expires (ISO 8601); None: never.")
    sensitivity: str | None = None
    superseded: list[str] = Field(
        [], description="Notes this one superseded as it was taken (a new soul supersedes the last)."
    )


class NotesTaken(Result):
    notes: list[NoteTaken]

    @property
    def failed(self) -> list[NoteTaken]:
        return [n for n in self.notes if n.parsed is False]


class Done(Result):
    details: dict[str, Any] = {}


class MessageTaken(Result):
    id: str = Field(description="The caller's message id.")
    message_id: str = Field(description="Engram's id of the message.")
    being_id: str
    user: str
    role: str
    at: str
    conversation_id: str
    session_id: str | None = Field(None, description="The session it joined; None: a late message in none.")
    number: int = Field(description="Its number in the conversation with this user (from 1).")
    journalled: bool = Field(description="Whether its cleaned text is long enough for the journal.")
    duplicate: bool = Field(False, description="True when this id was taken before: nothing was written.")


class MessagesTaken(Result):
    messages: list[MessageTaken]
    refused: list[dict[str, Any]] = Field(
        [], description="Messages left out of a batch taken with `skip_refused`: index, code, field, message."
    )


class FactWritten(Result):
    fact_id: str
    owner: str = Field(description="The being's or the space's name that owns the fact.")
    owner_kind: str = Field(description="being or space.")
    outcome: str = Field(description="stated (new), revised (content changed), reinforced (said again).")
    version: int = Field(
        description="The fact's version after this write: its history has this many entries."
    )
    importance: int
    status: str


class FactsWritten(Result):
    facts: list[FactWritten]
    refused: list[dict[str, Any]] = []
