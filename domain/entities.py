"""Entity references (spec 004's `entityRefs`) and the aliases that merge them (issue #11, ADR 0056).

A ref is `<type>:<slug>`: `person:john_doe`, `org:acme_corp`. The slug is the label lowercased, its
punctuation removed, spaces and hyphens turned into underscores. An owner (a being or a space) keeps
one `EntityMap` of aliases: `person:makesh` merged into `person:mukesh` (speech-to-text variants)
reads as `person:mukesh` everywhere, until it is unmerged. Both are events; nothing is rewritten.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition

MAX_REF_CHARS = 120
MAX_REFS = 16
_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_PUNCTUATION = re.compile(r"[^\w\s-]", re.UNICODE)
_SEPARATORS = re.compile(r"[\s_-]+", re.UNICODE)


def entity_slug(label: str) -> str:
    """Spec 004's slug: lowercase, punctuation removed, spaces and hyphens to underscores (runs of
    them to one). NFKC first, so that two spellings that look the same give one slug."""
    text = unicodedata.normalize("NFKC", label).lower()
    text = _PUNCTUATION.sub("", text)
    return _SEPARATORS.sub("_", text).strip("_")


def check_entity_ref(ref: str, field: str = "entity_refs") -> str:
    """`ref` if it is `<type>:<slug>` with a slug as `entity_slug` writes it, else `InvalidInput`."""
    if not isinstance(ref, str) or len(ref) > MAX_REF_CHARS or ref.count(":") != 1:
        raise InvalidInput(
            f"{field}: an entity ref is <type>:<slug>, e.g. person:john_doe; got {ref!r}", field=field
        )
    kind, slug = ref.split(":")
    if not _TYPE.match(kind) or not slug or entity_slug(slug) != slug:
        raise InvalidInput(
            f"{field}: an entity ref is <type>:<slug> (type in a-z, slug lowercase with underscores, no "
            f"punctuation), e.g. person:john_doe; got {ref!r}",
            field=field,
        )
    return ref


def entity_ref(kind: str, label: str) -> str:
    """The ref of an entity of `kind` called `label` (`person`, "John Doe" → `person:john_doe`)."""
    return check_entity_ref(f"{kind}:{entity_slug(label)}")


def check_entity_refs(refs: list[str], field: str = "entity_refs") -> list[str]:
    if len(refs) > MAX_REFS:
        raise InvalidInput(f"{field}: at most {MAX_REFS} entity refs", field=field)
    clean: list[str] = []
    for i, ref in enumerate(refs):
        check_entity_ref(ref, f"{field}.{i}")
        if ref not in clean:
            clean.append(ref)
    return clean


class EntityMap(BeingScopedAggregate):
    """The aliases of one owner's entities (`being_id` is the owner: a being or a space)."""

    TOPIC = "engram.EntityMap"

    class Event(Aggregate.Event):
        TOPIC = "engram.EntityMap.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.EntityMap.Started"
        class_version = 1

    class Merged(Event):
        """`alias` reads as `into` from now on."""

        TOPIC = "engram.EntityMap.Merged"
        class_version = 1
        alias: str
        into: str

        def apply(self, m: EntityMap) -> None:
            m.aliases[self.alias] = self.into

    class Unmerged(Event):
        TOPIC = "engram.EntityMap.Unmerged"
        class_version = 1
        alias: str

        def apply(self, m: EntityMap) -> None:
            m.aliases.pop(self.alias, None)

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.aliases: dict[str, str] = {}

    @classmethod
    def start(cls, map_id: UUID, owner_id: UUID, at: datetime) -> EntityMap:
        m: EntityMap = cls._create(cls.Started, id=map_id, being_id=owner_id, timestamp=at)
        return m

    def canonical(self, ref: str) -> str:
        """The ref `ref` reads as: its merges followed to the end."""
        seen = {ref}
        while ref in self.aliases:
            ref = self.aliases[ref]
            if ref in seen:  # never written (merge refuses cycles); a guard for hand-made logs
                break
            seen.add(ref)
        return ref

    def merge(self, alias: str, into: str, at: datetime) -> None:
        check_entity_ref(alias, "alias")
        check_entity_ref(into, "into")
        if alias in self.aliases:
            raise InvalidTransition(f"{alias} is already merged into {self.aliases[alias]}; unmerge it first")
        if self.canonical(into) == alias:
            raise InvalidInput(
                f"merging {alias} into {into} would make {alias} an alias of itself", field="into"
            )
        self._emit(self.Merged, at, alias=alias, into=into)

    def unmerge(self, alias: str, at: datetime) -> None:
        check_entity_ref(alias, "alias")
        if alias not in self.aliases:
            raise InvalidTransition(f"{alias} is not merged into another entity")
        self._emit(self.Unmerged, at, alias=alias)
