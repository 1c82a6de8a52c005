"""A memory's history for the explorer's item pages (issue #14, ADR 0086): every event of one
aggregate with its log position and the change it made to the state, and the links between items
(a cluster's nodes a page at a time, a fact's source message).

One replay, not one per version: the events are applied in order and each state is compared with
the one before it. A page of the timeline replays up to its last event only, so a long history costs
the events up to the page shown, never a replay per version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from engram.domain.errors import InvalidInput
from engram.domain.ids import message_id_for_key
from engram.domain.message import Message
from engram.projections.notes import utc_text
from engram.services.audit import AuditQueries
from engram.services.jsonview import aggregate_state, event_payload, event_type
from engram.services.store import AggregateStore

if TYPE_CHECKING:
    from datetime import datetime

    from engram.projections.queries import ReadModels

TIMELINE_PAGE = 50
MAX_TIMELINE_PAGE = 500
CLUSTER_NODES_PAGE = 50
# Every event moves these; the timeline shows the version and the time in their own columns.
_UNCHANGING = {"version", "modified_on"}


@dataclass(frozen=True)
class Change:
    """One field an event changed: its value before (None: absent) and after (None: removed)."""

    name: str
    before: Any
    after: Any


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """The fields whose value differs between two states, in the order the later state lists them."""
    names = list(after) + [n for n in before if n not in after]
    return [
        Change(n, before.get(n), after.get(n))
        for n in names
        if n not in _UNCHANGING and before.get(n) != after.get(n)
    ]


def _check_page(page: int, per_page: int) -> None:
    if page < 1:
        raise InvalidInput(f"page must be 1 or more, not {page}")
    if not 1 <= per_page <= MAX_TIMELINE_PAGE:
        raise InvalidInput(f"per_page must be between 1 and {MAX_TIMELINE_PAGE}, not {per_page}")


def timeline(
    store: AggregateStore,
    kind: str,
    ref: str,
    *,
    being: str,
    page: int = 1,
    per_page: int = TIMELINE_PAGE,
) -> dict[str, Any]:
    """One page of the aggregate's events, oldest first, each with its log position, time, type,
    payload and `changes` (the fields it changed). Unknown ids, other kinds and another being's
    items are `NotFound`, as `engram.audit.history` has them."""
    _check_page(page, per_page)
    events = AuditQueries(store).events(kind, ref, being=being)
    total = len(events)
    pages = max(1, -(-total // per_page))
    if page > pages:
        raise InvalidInput(f"page must be between 1 and {pages}, not {page}")
    start, stop = (page - 1) * per_page, page * per_page
    positions = store.positions(UUID(str(events[0].originator_id)))
    aggregate: Any = None
    before: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    for i, event in enumerate(events[:stop]):
        aggregate = event.mutate(aggregate)
        if i < start - 1:
            continue  # before the page and not the state the page's first event changed
        after = aggregate_state(aggregate)
        if i >= start:
            entries.append(
                {
                    "position": positions.get(event.originator_version),
                    "version": event.originator_version,
                    "timestamp": event.timestamp.isoformat() if event.timestamp else None,
                    "type": event_type(event),
                    "payload": {k: v for k, v in event_payload(event).items() if k != "being_id"},
                    "changes": changes(before, after),
                }
            )
        before = after
    return {"events": entries, "page": page, "pages": pages, "per_page": per_page, "total": total}


def cluster_nodes(
    read: ReadModels,
    being_id: UUID,
    cluster_id: UUID,
    *,
    now: datetime,
    include_sensitive: bool,
    after: int | None = None,
    limit: int = CLUSTER_NODES_PAGE,
) -> tuple[list[dict[str, Any]], int | None]:
    """A page of the cluster's nodes in the order they were noted, after `after` (the `seq` — the
    log position that made it — of the previous page's last node): keyset paging on the index
    `sequence`, so a page of a large cluster reads about a page of rows, not the whole cluster sorted.
    Returns the rows and the key of the next page (None: the last). Nodes a list of nodes hides
    (expired; sensitive ones without `include_sensitive`) are left out."""
    condition, params = read.visible(utc_text(now), include_sensitive=include_sensitive)
    if after is not None:
        condition, params = f"({condition}) AND seq > ?", [*params, after]
    rows = read.nodes(
        being_id, cluster_id=cluster_id, order="seq", limit=limit + 1, where=(condition, params)
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, int(rows[-1]["seq"]) if more and rows else None


def source_message(store: AggregateStore, being_id: UUID, key: str | None) -> dict[str, Any] | None:
    """The message a fact was extracted from (by its key), if it is this being's and still readable."""
    if not key:
        return None
    found = store.find(Message, message_id_for_key(being_id, key))
    if found is None or found.being_id != being_id:
        return None
    return {
        "id": str(found.id),
        "key": key,
        "role": found.role,
        "user": found.user,
        "text": found.text,
        "at": found.at.isoformat(),
        "session_id": str(found.session_id) if found.session_id else None,
    }
