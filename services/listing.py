"""Listing a being's clusters and nodes as they are: for looking around, so nothing is reactivated."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel

from engram.domain.errors import InvalidInput
from engram.projections.notes import utc_text
from engram.services.beings import parse_uuid, resolve_being_id
from engram.services.errors import NotFound
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
