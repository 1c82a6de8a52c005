"""The event log as projections read it (`EventSource`), and a read shared by several views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID


class EventSource(Protocol):
    """The part of the event log that projections read.

    A log may give a position to a second event after a power cut (SQLite, when commits skipped the
    wait for the disk: ADR 0018): its `reuses_positions` is True, and views then check, before each
    batch, that `key_at` their position is still the event they applied there.
    """

    def head(self) -> int: ...

    def decoded_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, Any]]:
        """(position, event) of up to `limit` events of `topics` (all when empty) from `start` to
        `stop` (inclusive), in log order."""
        ...

    def tagged_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, str, Any]]:
        """`decoded_events`, each with the topic it is stored under: (position, topic, event)."""
        ...

    @property
    def reuses_positions(self) -> bool: ...

    def key_at(self, position: int) -> str | None:
        """The `event_key` of the event at `position`, None where there is none."""
        ...


def event_key(originator_id: UUID | str, version: int) -> str:
    """What identifies an event in the log, whatever its position: its aggregate and version."""
    return f"{originator_id.hex if isinstance(originator_id, UUID) else originator_id}:{version}"


SHARED_READ_MAX_GAP = 64
"""Views at most this many events behind the head share one read of them (`shared_read`)."""


class SharedRead:
    """An `EventSource` that serves reads of (after, head] from events read once for several views.

    `events` are (position, stored topic, event) of every event of `topics` in (after, head]. A read
    outside that range, or of topics not all among them, goes to `source`. The views share the event
    objects, as a rebuild of several views does (rebuild.py `rebuild_many`).
    """

    def __init__(
        self,
        source: EventSource,
        after: int,
        head: int,
        topics: Sequence[str],
        events: list[tuple[int, str, Any]],
    ) -> None:
        self.source, self.after, self.until = source, after, head
        self.topics = frozenset(topics)
        self.events = events

    def head(self) -> int:
        return self.source.head()

    @property
    def reuses_positions(self) -> bool:
        return self.source.reuses_positions

    def key_at(self, position: int) -> str | None:
        """From the events read once when one of them is at `position` (the head, after a write,
        usually is): views that had nothing to apply then need no read of the log for their key."""
        if self.after < position <= self.until:
            for p, _, event in reversed(self.events):
                if p == position:
                    return event_key(event.originator_id, event.originator_version)
                if p < position:
                    break
        return self.source.key_at(position)

    def decoded_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, Any]]:
        wanted = set(topics)
        if (
            start <= self.after
            or stop is None
            or stop > self.until
            or not wanted
            or not wanted <= self.topics
        ):
            return self.source.decoded_events(start, limit, topics, stop)
        out = [(p, e) for p, t, e in self.events if start <= p <= stop and t in wanted]
        return out[:limit]

    def tagged_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, str, Any]]:
        return self.source.tagged_events(start, limit, topics, stop)


def shared_read(source: EventSource, behind: Sequence[tuple[int, Sequence[str]]], head: int) -> EventSource:
    """The source views catch up from, given each one's (position, topics): when several are a few
    events behind the head, their events read and decoded once (after a recall, the memory and vector
    views both read the same node events)."""
    if len(behind) < 2:
        return source
    after = min(position for position, _ in behind)
    if head - after > SHARED_READ_MAX_GAP:
        return source
    topics = sorted({t for _, wanted in behind for t in wanted})
    # At most `head - after` events lie in (after, head]: with that limit the read is complete.
    return SharedRead(
        source, after, head, topics, source.tagged_events(after + 1, head - after, topics, head)
    )
