"""The global log a page at a time, filtered by being, aggregate, event type and time (the memory
explorer's log page, issue #14).

`AuditQueries.log` filters by being only, and scans until it has a page: a filter that matches
little would read the whole log for one request. Here every request reads at most `MAX_SCAN` events
(one aggregate's filter reads that aggregate's positions only) and says where it stopped, so that the
next page continues from there: a page costs the same at 10 events or 10 million.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.domain.errors import InvalidInput
from engram.services.audit import AuditQueries
from engram.services.beings import parse_uuid, resolve_being

MAX_SCAN = 5_000
"""Events one request reads at most, whatever the filters."""
MAX_PAGE = 200
MAX_TYPE_CHARS = 100


@dataclass(frozen=True)
class LogFilter:
    being: str | None = None
    aggregate: str | None = None
    type: str | None = None
    """An event type (`MemoryNode.Reactivated`) or its last part (`Reactivated`), any case."""
    since: datetime | None = None
    until: datetime | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.being, self.aggregate, self.type, self.since, self.until))


@dataclass(frozen=True)
class LogPage:
    entries: list[dict[str, Any]]
    after: int
    """The position this page started after."""
    scanned_to: int
    """The last position read: the next page starts after it."""
    head: int
    """The log's newest position when the page was read."""

    @property
    def more(self) -> bool:
        return self.scanned_to < self.head


def parse_instant(text: str | None, what: str) -> datetime | None:
    """An ISO instant with a timezone (`2026-11-27T20:00:00Z`), or None for an empty field."""
    if text is None or not text.strip():
        return None
    try:
        found = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{what} is not an ISO instant such as 2026-11-27T20:00:00Z") from None
    if found.tzinfo is None:
        raise InvalidInput(f"{what} needs a timezone, e.g. 2026-11-27T20:00:00Z")
    return found


def _matches_type(entry: dict[str, Any], wanted: str) -> bool:
    kind = str(entry["type"]).lower()
    return kind == wanted or kind.rsplit(".", 1)[-1] == wanted


def _keep(entry: dict[str, Any], f: LogFilter, wanted_type: str | None) -> bool:
    if wanted_type is not None and not _matches_type(entry, wanted_type):
        return False
    if f.since is not None or f.until is not None:
        if entry["timestamp"] is None:  # an erased being's event keeps no time (ADR 0073)
            return False
        at = datetime.fromisoformat(entry["timestamp"])
        if (f.since is not None and at < f.since) or (f.until is not None and at > f.until):
            return False
    return True


def log_page(audit: AuditQueries, f: LogFilter, *, after: int = 0, limit: int = 50) -> LogPage:
    """Up to `limit` entries after position `after` that pass the filter, reading at most `MAX_SCAN`
    events. Raises `InvalidInput` for a bad filter and `NotFound` for an unknown being."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}")
    if after < 0:
        raise InvalidInput("after must be 0 or more")
    if f.type is not None and len(f.type) > MAX_TYPE_CHARS:
        raise InvalidInput(f"the event type has at most {MAX_TYPE_CHARS} characters")
    if f.since is not None and f.until is not None and f.since > f.until:
        raise InvalidInput("since is after until")
    store = audit.store
    being_id = resolve_being(store, f.being).id if f.being else None
    wanted_type = f.type.strip().lower() if f.type and f.type.strip() else None
    head = store.head()
    if f.aggregate:
        aggregate_id = parse_uuid(f.aggregate.strip())
        if aggregate_id is None:
            raise InvalidInput(f"the aggregate id {f.aggregate!r} is not a UUID")
        return _aggregate_page(audit, f, aggregate_id, being_id, wanted_type, after, limit, head)
    entries: list[dict[str, Any]] = []
    scanned_to = after
    start = after + 1
    while start <= head and scanned_to - after < MAX_SCAN and len(entries) < limit:
        batch = store.notifications(start, min(1_000, MAX_SCAN - (scanned_to - after)), stop=head)
        if not batch:
            break
        for notification in batch:
            scanned_to = notification.id
            entry = audit.entry(notification, being_id)
            if entry is not None and _keep(entry, f, wanted_type):
                entries.append(entry)
                if len(entries) >= limit:
                    break
        start = scanned_to + 1
    if len(entries) < limit and scanned_to - after < MAX_SCAN:
        scanned_to = max(scanned_to, head)  # read to the head: nothing left to scan
    return LogPage(entries=entries, after=after, scanned_to=scanned_to, head=head)


def _aggregate_page(
    audit: AuditQueries,
    f: LogFilter,
    aggregate_id: UUID,
    being_id: UUID | None,
    wanted_type: str | None,
    after: int,
    limit: int,
    head: int,
) -> LogPage:
    """One aggregate's events: its positions first (an index read), then only those events."""
    store = audit.store
    positions = sorted(p for p in store.positions(aggregate_id).values() if after < p <= head)
    entries: list[dict[str, Any]] = []
    scanned_to = after
    for position in positions[:MAX_SCAN]:
        scanned_to = position
        for notification in store.notifications(position, 1, stop=position):
            entry = audit.entry(notification, being_id)
            if entry is not None and _keep(entry, f, wanted_type):
                entries.append(entry)
        if len(entries) >= limit:
            break
    if len(entries) < limit:
        scanned_to = head
    return LogPage(entries=entries, after=after, scanned_to=scanned_to, head=head)
