"""Listing a being's clusters, nodes and notes as they are: for looking around, so nothing is
reactivated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from engram.domain.errors import InvalidInput
from engram.domain.note import note_kind
from engram.projections.notes import utc_text
from engram.services.beings import parse_uuid, resolve_being_id
from engram.services.errors import NotFound
from engram.services.note_list import (
    DEFAULT_NOTE_LIST,
    MAX_NOTE_LIST,
    NoteListed,
    check_scope,
    filter_tags,
)
from engram.services.reading import NodeView

NODE_STATES = ("active", "dying", "dead")
MAX_LIST = 10_000


class ClusterTree(BaseModel):
    id: str
    name: str
    is_root: bool
    active_count: int
    total_count: int
    children: list[ClusterTree]


class Listing:
    """`clusters` and `nodes` of one being, from the memory view after it caught up with the log."""

    def __init__(self, engram: Any) -> None:
        self.e = engram

    def _being(self, ref: str) -> UUID:
        being_id = resolve_being_id(self.e.store, ref)
        self.e.views.ensure(names=["memory"])
        return being_id

    def clusters(self, being_ref: str) -> list[ClusterTree]:
        """The being's two roots by name, each with its sub-clusters nested (oldest first), and sizes."""
        rows = self.e.views.read.clusters(self._being(being_ref))
        children: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if not row["is_root"]:
                children.setdefault(row["parent_id"], []).append(row)

        def tree(row: dict[str, Any]) -> ClusterTree:
            return ClusterTree(
                id=row["id"],
                name=row["name"],
                is_root=bool(row["is_root"]),
                active_count=row["active_count"],
                total_count=row["total_count"],
                children=[tree(c) for c in children.get(row["id"], [])],
            )

        return [tree(r) for r in sorted(rows, key=lambda r: r["name"]) if r["is_root"]]

    def nodes(
        self,
        being_ref: str,
        *,
        cluster: str | None = None,
        state: str | None = None,
        limit: int = 50,
        include_sensitive: bool = False,
    ) -> list[NodeView]:
        """The being's nodes, oldest first; `cluster` (an id or a name) and `state` narrow them. Nodes
        past their notes' expiry are left out, and sensitive ones unless `include_sensitive` (ADR 0046)."""
        if state is not None and state not in NODE_STATES:
            raise InvalidInput(f"state is one of {', '.join(NODE_STATES)}, not {state!r}")
        if not 1 <= limit <= MAX_LIST:
            raise InvalidInput(f"limit is between 1 and {MAX_LIST}")
        being_id = self._being(being_ref)
        cluster_id = self._cluster_id(being_id, cluster) if cluster is not None else None
        read = self.e.views.read
        rows = read.nodes(
            being_id,
            statuses=[state] if state else None,
            cluster_id=cluster_id,
            limit=limit,
            where=read.visible(utc_text(self.e.clock.now()), include_sensitive=include_sensitive),
        )
        return [NodeView.of(r) for r in rows]

    def _cluster_id(self, being_id: UUID, ref: str) -> UUID:
        as_id = parse_uuid(ref)
        if as_id is not None and self.e.views.read.cluster(being_id, as_id) is not None:
            return as_id
        named = [c for c in self.e.views.read.clusters(being_id) if c["name"] == ref]
        if len(named) > 1:
            ids = ", ".join(c["id"] for c in named)
            raise InvalidInput(f"{len(named)} clusters are named {ref!r}; give one of their ids: {ids}")
        if not named:
            raise NotFound(f"cluster {ref!r} not found")
        return UUID(named[0]["id"])

    def notes(
        self,
        being_ref: str,
        *,
        kinds: Sequence[str] | None = None,
        scope: str | None = None,
        tags: Sequence[str] | None = None,
        unread: bool | None = None,
        limit: int = DEFAULT_NOTE_LIST,
        include_inactive: bool = False,
        include_sensitive: bool = False,
    ) -> list[NoteListed]:
        """The being's notes, newest first by `at` (then id); `tags` match any. Only active notes
        (neither superseded nor expired by now) that are not sensitive, unless `include_inactive` and
        `include_sensitive` say otherwise (`note_list.py`)."""
        if isinstance(limit, bool) or not 1 <= limit <= MAX_NOTE_LIST:
            raise InvalidInput(f"limit is between 1 and {MAX_NOTE_LIST}", field="limit")
        kind_values = [note_kind(k).value for k in kinds or []]
        check_scope(scope)
        clean_tags = filter_tags(list(tags or []))
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=["notes"], being=being_id)
        now = utc_text(self.e.clock.now())
        rows = self.e.views.read.listed_notes(
            being_id,
            kinds=kind_values,
            scope=scope,
            tags=clean_tags,
            read=None if unread is None else not unread,
            active_at=None if include_inactive else now,
            include_sensitive=include_sensitive,
            limit=limit,
        )
        return [NoteListed.of(r, now) for r in rows]
