"""Durable facts (issue #11, ADR 0056): short statements about the world, kept by key, with history.

A fact belongs to an *owner*: one being (private) or a space shared by several beings. Its aggregate
id derives from the owner and its key — spec 004's `memory_key` when it has one, else its subject and
normalised text — so a fact stated again, or updated, is the same aggregate at a new version: a
twin cannot be added, and two writers of one key at once both land as successive versions (the log
takes one, the other is retried on the new version). Nothing is overwritten: `engram show fact ID
--as-of T` replays what was believed then.

`being_id` of a fact's events is its owner's id (a being's or a space's), as for every aggregate:
the views scope rows, and hold back a failing owner's events, by it.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.embedding import Embedding
from engram.domain.entities import check_entity_refs, entity_slug
from engram.domain.errors import EmbeddingMismatch, InvalidInput, InvalidTransition
from engram.domain.text import check_text

MIN_FACT_CHARS = 3
MAX_FACT_CHARS = 400  # normalised: a fact is a line, not a document
MAX_EVIDENCE_CHARS = 500
MAX_LABEL_CHARS = 200  # subject, entity label, source type, source entity, channel, message id
MAX_KEY_PART_CHARS = 100
MAX_IMPORTANCE = 3
DEFAULT_IMPORTANCE = 1
LORE_SUBJECT = "__lore__"
LORE_CONFIDENCE = 0.72  # spec 001


class FactType(StrEnum):
    """Spec 001's type (`general` collapses to `other`); `lore` for lore lines."""

    PREFERENCE = "preference"
    PROFILE = "profile"
    RELATIONSHIP = "relationship"
    PROJECT = "project"
    OTHER = "other"
    LORE = "lore"


class MemoryType(StrEnum):
    """Spec 004's memory type."""

    PROFILE = "PROFILE"
    PEOPLE = "PEOPLE"
    PROJECT = "PROJECT"


class EntityType(StrEnum):
    PERSON = "person"
    PLACE = "place"
    ORG = "org"
    PROJECT = "project"


class SubtypeFactType(StrEnum):
    """Spec 004's `subtype.factType`."""

    FACT = "fact"
    PREFERENCE = "preference"
    RELATIONSHIP = "relationship"
    FRICTION = "friction"
    HABIT = "habit"


class FactSource(StrEnum):
    EXTRACTION = "extraction"  # an LLM read it in a message (with its grounding checked)
    SEEDED_PROFILE = "seeded_profile"  # loaded from a profile (`facts import`)
    LORE = "lore"  # `engram lore`: a line the being keeps about its world
    MANUAL = "manual"  # `engram facts add`
    CURATED_FOLD = "curated_fold"  # several facts folded into one


class FactStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"  # soft: hidden from retrieval, kept with its history


class ArchiveReason(StrEnum):
    MANUAL = "manual"
    CAPACITY = "capacity"  # more than the active facts a subject keeps (80; 120 lore lines)
    PRUNING = "pruning"  # dreaming: old, unimportant, never restated nor pinned (ADR 0066)


def _enum(cls: type[StrEnum], value: Any, field: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(m.value for m in cls)
        raise InvalidInput(f"{field}: unknown value {value!r}; one of {names}", field=field) from None


def parse_fact_type(value: str) -> FactType:
    value = value.strip().lower() if isinstance(value, str) else value
    return _enum(FactType, "other" if value == "general" else value, "type")  # type: ignore[no-any-return]


def normalize_fact_text(text: str) -> str:
    """Trimmed, every run of whitespace one space: the form a fact is kept, compared and keyed in."""
    return " ".join(text.split())


def lore_text(line: str) -> str:
    """Spec 001's lore fact: `Memory line: <normalised line>.`"""
    line = normalize_fact_text(line).rstrip(".")
    return f"Memory line: {line}."


def _label(field: str, value: str | None, limit: int = MAX_LABEL_CHARS) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidInput(f"{field} has 1 to {limit} characters, not only spaces", field=field)
    check_text(field, value)
    return value


def _unit(field: str, value: float) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not 0.0 <= value <= 1.0
        or math.isnan(value)
    ):
        raise InvalidInput(f"{field} is between 0 and 1", field=field)
    return float(value)


def check_memory_key(key: str) -> str:
    """Spec 004's `type|entityType|primaryRef|factType`: four non-empty parts."""
    if not isinstance(key, str):
        raise InvalidInput("memory_key is text", field="memory_key")
    parts = key.split("|")
    if len(parts) != 4 or not all(0 < len(p) <= MAX_KEY_PART_CHARS and p.strip() == p for p in parts):
        raise InvalidInput(
            "memory_key is type|entityType|primaryRef|factType, e.g. people|person|john_doe|relationship",
            field="memory_key",
        )
    check_text("memory_key", key)
    return key


def memory_key(memory_type: str, entity_type: str, primary_ref: str, subtype_fact_type: str) -> str:
    """Spec 004's key, from its parts (`primary_ref` as a ref or a label: its slug is used)."""
    slug = entity_slug(primary_ref.split(":", 1)[-1])
    return check_memory_key(f"{memory_type.lower()}|{entity_type}|{slug}|{subtype_fact_type}")


def fact_key(content: FactContent) -> str:
    """What makes two statements one fact: the memory key, or else (subject, normalised text)."""
    if content.memory_key is not None:
        return "key:" + content.memory_key
    return f"text:{content.subject}|{content.text.casefold()}"


class FactContent:
    """A fact as stated, checked. `importance` is what the statement gives (0–3); pinned forces 3."""

    __slots__ = (
        "channel",
        "confidence",
        "entity_label",
        "entity_refs",
        "entity_type",
        "evidence",
        "fact_type",
        "importance",
        "memory_key",
        "memory_type",
        "pinned",
        "source",
        "source_entity",
        "source_message_id",
        "source_trust",
        "source_type",
        "subject",
        "subtype_fact_type",
        "text",
    )

    def __init__(
        self,
        text: str,
        subject: str,
        *,
        fact_type: FactType | str = FactType.OTHER,
        memory_type: MemoryType | str | None = None,
        entity_type: EntityType | str | None = None,
        subtype_fact_type: SubtypeFactType | str | None = None,
        memory_key: str | None = None,
        evidence: str | None = None,
        source_message_id: str | None = None,
        confidence: float = 1.0,
        importance: int = DEFAULT_IMPORTANCE,
        pinned: bool = False,
        entity_refs: list[str] | None = None,
        entity_label: str | None = None,
        source: FactSource | str = FactSource.MANUAL,
        source_type: str | None = None,
        source_trust: float = 1.0,
        source_entity: str | None = None,
        channel: str | None = None,
    ) -> None:
        if not isinstance(text, str):
            raise InvalidInput("a fact is text", field="text")
        check_text("text", text)
        self.text = normalize_fact_text(text)
        if not MIN_FACT_CHARS <= len(self.text) <= MAX_FACT_CHARS:
            raise InvalidInput(
                f"a fact has {MIN_FACT_CHARS} to {MAX_FACT_CHARS} characters (whitespace collapsed), "
                f"got {len(self.text)}",
                field="text",
            )
        self.subject: str = _label("subject", subject) or ""
        self.fact_type: str = parse_fact_type(fact_type).value
        self.memory_type = _enum(MemoryType, memory_type, "memory_type").value if memory_type else None
        self.entity_type = _enum(EntityType, entity_type, "entity_type").value if entity_type else None
        self.subtype_fact_type = (
            _enum(SubtypeFactType, subtype_fact_type, "subtype_fact_type").value
            if subtype_fact_type
            else None
        )
        self.memory_key = check_memory_key(memory_key) if memory_key is not None else None
        self.evidence = _label("evidence", evidence, MAX_EVIDENCE_CHARS)
        self.source_message_id = _label("source_message_id", source_message_id)
        self.confidence = _unit("confidence", confidence)
        if (
            isinstance(importance, bool)
            or not isinstance(importance, int)
            or not 0 <= importance <= MAX_IMPORTANCE
        ):
            raise InvalidInput(f"importance is a whole number from 0 to {MAX_IMPORTANCE}", field="importance")
        self.pinned = bool(pinned)
        self.importance = MAX_IMPORTANCE if self.pinned else importance
        self.entity_refs = check_entity_refs(list(entity_refs or []))
        self.entity_label = _label("entity_label", entity_label)
        self.source: str = _enum(FactSource, source, "source").value
        self.source_type = _label("source_type", source_type)
        self.source_trust = _unit("source_trust", source_trust)
        self.source_entity = _label("source_entity", source_entity)
        self.channel = _label("channel", channel)

    def fields(self) -> dict[str, Any]:
        return {
            name: (list(v) if isinstance(v := getattr(self, name), list) else v) for name in self.__slots__
        }


def reinforced_importance(stated: int, reinforcements: int, pinned: bool) -> int:
    """Spec 004's "importance bootstrap problem": a fact said again matters more. Each restatement
    of the same fact counts; the importance the statements gave rises by one at the 1st, 3rd and 7th
    restatement (`⌊log2(1 + n)⌋`), never above 3; pinned is 3 (ADR 0056)."""
    if pinned:
        return MAX_IMPORTANCE
    return min(MAX_IMPORTANCE, stated + int(math.log2(1 + reinforcements)))


class Fact(BeingScopedAggregate):
    TOPIC = "engram.Fact"

    class Event(Aggregate.Event):
        TOPIC = "engram.Fact.Event"
        being_id: UUID  # the owner: a being or a space

    class Stated(Event, Aggregate.Created):
        """A new fact. `written_by`: the being whose command wrote it (for a space's fact, one of
        its members)."""

        TOPIC = "engram.Fact.Stated"
        class_version = 1
        owner_kind: str  # being | space
        written_by: UUID
        key: str
        text: str
        subject: str
        fact_type: str
        memory_type: str | None
        entity_type: str | None
        subtype_fact_type: str | None
        memory_key: str | None
        evidence: str | None
        source_message_id: str | None
        confidence: float
        importance: int
        pinned: bool
        entity_refs: list[str]
        entity_label: str | None
        source: str
        source_type: str | None
        source_trust: float
        source_entity: str | None
        channel: str | None

    class Revised(Event):
        """The fact's content changed (a keyed fact updated, e.g. "lives in Austin" → "lives in
        Denver"): the new content whole; the old stays in the history. An archived fact revised
        is active again."""

        TOPIC = "engram.Fact.Revised"
        class_version = 1
        written_by: UUID
        text: str
        subject: str
        fact_type: str
        memory_type: str | None
        entity_type: str | None
        subtype_fact_type: str | None
        evidence: str | None
        source_message_id: str | None
        confidence: float
        importance: int
        entity_refs: list[str]
        entity_label: str | None
        source: str
        source_type: str | None
        source_trust: float
        source_entity: str | None
        channel: str | None

        def apply(self, f: Fact) -> None:
            for name in FACT_CONTENT_FIELDS:
                setattr(f, name, getattr(self, name))
            f.stated_importance = self.importance
            f.reinforcements = 0
            f.importance = reinforced_importance(self.importance, 0, f.pinned)
            f.status = FactStatus.ACTIVE.value

    class Reinforced(Event):
        """The same fact stated again: counted, and its importance raised by the rule of
        `reinforced_importance`. An archived fact stated again is active again."""

        TOPIC = "engram.Fact.Reinforced"
        class_version = 1
        written_by: UUID
        reinforcements: int
        stated_importance: int  # the highest importance a statement of it gave
        importance: int
        source_message_id: str | None

        def apply(self, f: Fact) -> None:
            f.reinforcements = self.reinforcements
            f.stated_importance = self.stated_importance
            f.importance = self.importance
            f.status = FactStatus.ACTIVE.value

    class Pinned(Event):
        TOPIC = "engram.Fact.Pinned"
        class_version = 1

        def apply(self, f: Fact) -> None:
            f.pinned = True
            f.importance = MAX_IMPORTANCE

    class Unpinned(Event):
        """`importance`: what the statements and reinforcements give it without the pin."""

        TOPIC = "engram.Fact.Unpinned"
        class_version = 1
        importance: int

        def apply(self, f: Fact) -> None:
            f.pinned = False
            f.importance = self.importance

    class Archived(Event):
        TOPIC = "engram.Fact.Archived"
        class_version = 1
        reason: str

        def apply(self, f: Fact) -> None:
            f.status = FactStatus.ARCHIVED.value

    class Embedded(Event):
        """The fact's vector, so that a rebuild of its search view never calls an embedder."""

        TOPIC = "engram.Fact.Embedded"
        class_version = 1
        embedding: Embedding
        text: str  # the text embedded: a revision after it makes the vector stale

        def apply(self, f: Fact) -> None:
            f.embedding = self.embedding
            f.embedded_text = self.text

    class Reembedded(Embedded):
        """A vector of another model replacing the fact's (`engram embeddings migrate`, ADR 0071)."""

        TOPIC = "engram.Fact.Reembedded"
        class_version = 1

    def __init__(
        self,
        being_id: UUID,
        owner_kind: str,
        written_by: UUID,
        key: str,
        text: str,
        subject: str,
        fact_type: str,
        memory_type: str | None,
        entity_type: str | None,
        subtype_fact_type: str | None,
        memory_key: str | None,
        evidence: str | None,
        source_message_id: str | None,
        confidence: float,
        importance: int,
        pinned: bool,
        entity_refs: list[str],
        entity_label: str | None,
        source: str,
        source_type: str | None,
        source_trust: float,
        source_entity: str | None,
        channel: str | None,
    ) -> None:
        self.being_id = being_id
        self.owner_kind = owner_kind
        self.key = key
        self.written_by = written_by
        self.text = text
        self.subject = subject
        self.fact_type = fact_type
        self.memory_type = memory_type
        self.entity_type = entity_type
        self.subtype_fact_type = subtype_fact_type
        self.evidence = evidence
        self.source_message_id = source_message_id
        self.confidence = confidence
        self.entity_refs = list(entity_refs)
        self.entity_label = entity_label
        self.source = source
        self.source_type = source_type
        self.source_trust = source_trust
        self.source_entity = source_entity
        self.channel = channel
        self.memory_key = memory_key
        self.pinned = pinned
        self.stated_importance = importance
        self.importance = importance
        self.reinforcements = 0
        self.status = FactStatus.ACTIVE.value
        self.embedding: Embedding | None = None
        self.embedded_text: str | None = None

    @property
    def owner_id(self) -> UUID:
        return self.being_id

    @property
    def active(self) -> bool:
        return self.status == FactStatus.ACTIVE.value

    @classmethod
    def state(
        cls,
        fact_id: UUID,
        owner_id: UUID,
        owner_kind: str,
        written_by: UUID,
        content: FactContent,
        at: datetime,
    ) -> Fact:
        if owner_kind not in ("being", "space"):
            raise InvalidInput("a fact's owner is a being or a space", field="space")
        fields = content.fields()
        fact: Fact = cls._create(
            cls.Stated,
            id=fact_id,
            being_id=owner_id,
            timestamp=at,
            owner_kind=owner_kind,
            written_by=written_by,
            key=fact_key(content),
            **fields,
        )
        return fact

    def content(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FACT_CONTENT_FIELDS}

    def restate(self, content: FactContent, written_by: UUID, at: datetime) -> str:
        """The fact stated again (same key): `reinforced` when it says the same, `revised` when its
        content changed; an archived fact becomes active again either way. Returns which."""
        if fact_key(content) != self.key:
            raise InvalidInput("a fact is restated under its own key", field="memory_key")
        new = content.fields()
        del new["memory_key"], new["pinned"]
        same_text = new["text"] == self.text
        if same_text and all(new[k] == getattr(self, k) for k in ("subject", "fact_type")):
            n = self.reinforcements + 1
            stated = max(self.stated_importance, content.importance)
            self._emit(
                self.Reinforced,
                at,
                written_by=written_by,
                reinforcements=n,
                stated_importance=stated,
                importance=reinforced_importance(stated, n, self.pinned),
                source_message_id=content.source_message_id,
            )
            return "reinforced"
        self._emit(self.Revised, at, written_by=written_by, **new)
        if content.pinned and not self.pinned:
            self._emit(self.Pinned, at)
        return "revised"

    def pin(self, at: datetime) -> None:
        if not self.active:
            raise InvalidTransition(f"fact {self.id} is archived: an archived fact is not pinned")
        if not self.pinned:
            self._emit(self.Pinned, at)

    def unpin(self, at: datetime) -> None:
        if self.pinned:
            self._emit(
                self.Unpinned,
                at,
                importance=reinforced_importance(self.stated_importance, self.reinforcements, False),
            )

    def archive(self, at: datetime, reason: ArchiveReason | str = ArchiveReason.MANUAL) -> None:
        if self.pinned:
            raise InvalidTransition(f"fact {self.id} is pinned: a pinned fact is never archived")
        if self.active:
            self._emit(self.Archived, at, reason=ArchiveReason(reason).value)

    def embed(self, embedding: Embedding, at: datetime) -> None:
        if self.embedding is not None and not self.embedding.same_space(embedding):
            raise EmbeddingMismatch(
                f"fact {self.id} holds a {self.embedding.model}/{self.embedding.dim} vector; "
                f"a {embedding.model}/{embedding.dim} vector is not mixed in",
            )
        self._emit(self.Embedded, at, embedding=embedding, text=self.text)

    def reembed(self, embedding: Embedding, at: datetime, text: str) -> bool:
        """Replace the vector with one of another model, of `text` (the text the old one was of: a
        migration changes the model, not what is embedded); False if it has this model's."""
        if self.embedding is not None and self.embedding.same_space(embedding):
            return False
        self._emit(self.Reembedded, at, embedding=embedding, text=text)
        return True


FACT_CONTENT_FIELDS = (
    "text",
    "subject",
    "fact_type",
    "memory_type",
    "entity_type",
    "subtype_fact_type",
    "evidence",
    "source_message_id",
    "confidence",
    "entity_refs",
    "entity_label",
    "source",
    "source_type",
    "source_trust",
    "source_entity",
    "channel",
)
"""What a revision replaces (not the key, the pinning or the importance, which have rules of their own)."""
