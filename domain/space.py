"""Spaces: facts shared by several beings (issue #11, ADR 0056).

Spec 001's guild and spec 004's global user memory are one idea: facts that more than one persona
reads. A space is named, has member beings, and owns facts as a being does; a being reads its own
facts and those of the spaces it is in, nothing else. Its id derives from its name, so the name is
unique and two creations race on one aggregate.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.text import check_text

MAX_SPACE_NAME_CHARS = 100
MAX_MEMBERS = 1000


def check_space_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_SPACE_NAME_CHARS:
        raise InvalidInput(
            f"a space's name has 1 to {MAX_SPACE_NAME_CHARS} characters, not only spaces", field="space"
        )
    check_text("space", name)
    return name.strip()


class Space(Aggregate):
    TOPIC = "engram.Space"

    class Event(Aggregate.Event):
        TOPIC = "engram.Space.Event"

    class Created(Event, Aggregate.Created):
        TOPIC = "engram.Space.Created"
        class_version = 1
        name: str
        members: list[UUID]

    class Joined(Event):
        TOPIC = "engram.Space.Joined"
        class_version = 1
        being_id: UUID

        def apply(self, space: Space) -> None:
            space.members.append(self.being_id)

    class Left(Event):
        TOPIC = "engram.Space.Left"
        class_version = 1
        being_id: UUID

        def apply(self, space: Space) -> None:
            space.members.remove(self.being_id)

    def __init__(self, name: str, members: list[UUID]) -> None:
        self.name = name
        self.members = list(members)

    @classmethod
    def create(cls, space_id: UUID, name: str, members: list[UUID], at: datetime) -> Space:
        name = check_space_name(name)
        unique = list(dict.fromkeys(members))
        if not unique:
            raise InvalidInput("a space has at least one member being", field="being")
        if len(unique) > MAX_MEMBERS:
            raise InvalidInput(f"a space has at most {MAX_MEMBERS} members", field="being")
        space: Space = cls._create(cls.Created, id=space_id, timestamp=at, name=name, members=unique)
        return space

    def join(self, being_id: UUID, at: datetime) -> None:
        if being_id in self.members:
            return
        if len(self.members) >= MAX_MEMBERS:
            raise InvalidInput(f"a space has at most {MAX_MEMBERS} members", field="being")
        self.trigger_event(self.Joined, timestamp=at, being_id=being_id)

    def leave(self, being_id: UUID, at: datetime) -> None:
        if being_id not in self.members:
            raise InvalidTransition(f"being {being_id} is not in space {self.name!r}")
        if len(self.members) == 1:
            raise InvalidTransition(f"{self.name!r} would have no member left")
        self.trigger_event(self.Left, timestamp=at, being_id=being_id)

    def has_member(self, being_id: UUID) -> bool:
        return being_id in self.members
