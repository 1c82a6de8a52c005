"""Auditor queries: history of an aggregate, its state as of a version or an instant, the global log."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.errors import InvalidInput
from engram.domain.fact import Fact
from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.domain.patrol_run import PatrolRun
from engram.domain.space import Space
from engram.domain.token import ApiToken
from engram.services.beings import parse_uuid, resolve_being
from engram.services.errors import NotFound
from engram.services.jsonview import aggregate_state, event_payload, event_topic, event_type
from engram.services.store import AggregateStore

MAX_LOG_LIMIT = 10_000
TAIL_PAGE = 1_000


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LOG_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LOG_LIMIT}")


class AggregateKind(StrEnum):
    BEING = "being"
    NOTE = "note"
    NODE = "node"
    CLUSTER = "cluster"
    PATROL_RUN = "patrol-run"
    TOKEN = "token"  # noqa: S105 - the aggregate kind, not a secret
    FACT = "fact"
    SPACE = "space"


KIND_CLASSES: dict[AggregateKind, type[Aggregate]] = {
    AggregateKind.BEING: Being,
    AggregateKind.NOTE: Note,
    AggregateKind.NODE: MemoryNode,
    AggregateKind.CLUSTER: Cluster,
    AggregateKind.PATROL_RUN: PatrolRun,
    AggregateKind.TOKEN: ApiToken,
    AggregateKind.FACT: Fact,
    AggregateKind.SPACE: Space,
}


_TOPIC_PREFIXES: dict[AggregateKind, str] = {
    kind: f"{cls.__dict__['TOPIC']}." for kind, cls in KIND_CLASSES.items()
}


def _kind_of_topic(topic: str) -> AggregateKind | None:
    for kind, prefix in _TOPIC_PREFIXES.items():
        if topic.startswith(prefix):
            return kind
    return None


def _kind(kind: str) -> AggregateKind:
    try:
        return AggregateKind(kind)
    except ValueError:
        raise InvalidInput(
            f"unknown kind {kind!r}; kinds are {', '.join(k.value for k in AggregateKind)}"
        ) from None


class AuditQueries:
    def __init__(self, store: AggregateStore) -> None:
        self.store = store

    def _resolve_id(self, kind: AggregateKind, ref: str) -> UUID:
        if kind is AggregateKind.BEING:
            return resolve_being(self.store, ref).id
        as_id = parse_uuid(ref)
        if as_id is None:
            raise InvalidInput(f"{ref!r} is not an id")
        return as_id

    def _events(self, kind: AggregateKind, ref: str, being_id: UUID | None) -> list[Any]:
        aggregate_id = self._resolve_id(kind, ref)
        events = self.store.events(aggregate_id)
        if not events or _kind_of_topic(event_topic(events[0])) is not kind:
            raise NotFound(f"{kind.value} {ref} not found")
        if being_id is not None and getattr(events[0], "being_id", None) != being_id:
            raise NotFound(f"{kind.value} {ref} not found")
        return events

    def events(self, kind: str, ref: str, *, being: str | None = None) -> list[Any]:
        """The aggregate's events, oldest first, checked as `history` checks them (the explorer's
        timeline replays them once, ADR 0086)."""
        being_id = resolve_being(self.store, being).id if being else None
        return self._events(_kind(kind), ref, being_id)

    def history(self, kind: str, ref: str, *, being: str | None = None) -> list[dict[str, Any]]:
        """Every event of one aggregate, oldest first."""
        k = _kind(kind)
        being_id = resolve_being(self.store, being).id if being else None
        return [
            {
                "version": e.originator_version,
                # An erased event's time went with its content (ADR 0073): null, as `log` has it.
                "timestamp": e.timestamp.isoformat() if e.timestamp else None,
                "type": event_type(e),
                "payload": event_payload(e),
            }
            for e in self._events(k, ref, being_id)
        ]

    def state(
        self,
        kind: str,
        ref: str,
        *,
        version: int | None = None,
        as_of: datetime | None = None,
        being: str | None = None,
    ) -> dict[str, Any]:
        """The aggregate at `version`, or at the instant `as_of` (its last event at or before it)."""
        if version is not None and as_of is not None:
            raise InvalidInput("give a version or an instant, not both")
        k = _kind(kind)
        being_id = resolve_being(self.store, being).id if being else None
        events = self._events(k, ref, being_id)
        head = events[-1].originator_version
        if as_of is not None:
            if as_of.tzinfo is None:
                raise InvalidInput("an instant needs a timezone, e.g. 2026-11-20T09:00:00Z")
            before = [e for e in events if e.timestamp <= as_of]
            if not before:
                raise NotFound(f"{k.value} {ref} did not exist yet at {as_of.isoformat()}")
            version = before[-1].originator_version
        if version is not None and not 1 <= version <= head:
            raise NotFound(f"{k.value} {ref} has versions 1 to {head}, not {version}")
        agg = self.store.get(KIND_CLASSES[k], UUID(str(events[0].originator_id)), version=version)
        state = aggregate_state(agg)
        state["kind"] = k.value
        state["latest_version"] = head
        return state

    def log(self, *, being: str | None = None, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """The global log in order, optionally only one being's events."""
        _check_limit(limit)
        being_id = resolve_being(self.store, being).id if being else None
        out: list[dict[str, Any]] = []
        for notification in self.store.iter_notifications(start=after + 1):
            entry = self._entry(notification, being_id)
            if entry is not None:
                out.append(entry)
            if len(out) >= limit:
                break
        return out

    def tail(self, *, being: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """The last `limit` events of the log (or of one being), oldest first: read backwards from the
        head a page at a time, so a being's tail costs its recent events, not the whole log."""
        _check_limit(limit)
        being_id = resolve_being(self.store, being).id if being else None
        out: list[dict[str, Any]] = []
        stop = self.store.head()
        while stop > 0 and len(out) < limit:
            start = max(1, stop - TAIL_PAGE + 1)
            page = self.store.notifications(start, TAIL_PAGE, stop=stop)
            entries = [e for e in (self._entry(n, being_id) for n in page) if e is not None]
            out = entries + out
            stop = start - 1
        return out[-limit:]

    def entry(self, notification: Any, being_id: UUID | None = None) -> dict[str, Any] | None:
        """One log entry as `log` gives it (None: not of `being_id`); `log_view` filters with it."""
        return self._entry(notification, being_id)

    def _entry(self, notification: Any, being_id: UUID | None) -> dict[str, Any] | None:
        event = self.store.decode(notification)
        if being_id is not None and getattr(event, "being_id", None) != being_id:
            return None
        kind = _kind_of_topic(notification.topic)
        return {
            "position": notification.id,
            "kind": kind.value if kind else None,
            "aggregate_id": str(notification.originator_id),
            "version": notification.originator_version,
            # An event whose key was destroyed keeps no time (it was inside the sealed state, ADR 0073).
            "timestamp": event.timestamp.isoformat() if event.timestamp else None,
            "type": event_type(event),
            "being_id": str(event.being_id) if getattr(event, "being_id", None) else None,
            "payload": event_payload(event),
        }
