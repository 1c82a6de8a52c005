"""Listing a being's facts and spaces (issue #11): what `engram facts list`, `GET /facts` and the MCP
tool `list_facts` show. Every read is scoped to the being's owners: itself and its spaces."""

from __future__ import annotations

import json
from typing import Any

from engram.domain.being import Being
from engram.domain.errors import InvalidInput
from engram.services.beings import resolve_being_id
from engram.services.store import AggregateStore
from engram.services.views import Views

MAX_LISTED_FACTS = 1000

SHOWN = (
    "id", "text", "subject", "fact_type", "memory_key", "importance", "pinned", "status",
    "version", "reinforcements", "confidence", "source", "source_trust", "channel",
    "entity_label", "updated_at",
)  # fmt: skip


def list_facts(
    store: AggregateStore,
    views: Views,
    being_ref: str,
    *,
    subject: str | None = None,
    include_archived: bool = False,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The being's own and its spaces' facts, the latest change first, each with its owner's name."""
    if not 1 <= limit <= MAX_LISTED_FACTS:
        raise InvalidInput(f"limit is 1 to {MAX_LISTED_FACTS}", field="limit")
    being_id = resolve_being_id(store, being_ref)
    views.ensure(names=["facts"])
    reads = views.facts
    names = {str(being_id): being_name(store, being_ref)}
    names.update({s["id"]: s["name"] for s in reads.spaces_of(being_id)})
    rows = reads.facts(list(names), subject=subject, include_archived=include_archived, limit=limit)
    return [
        {
            **{k: r[k] for k in SHOWN},
            "pinned": bool(r["pinned"]),
            "owner": names[r["owner_id"]],
            "owner_kind": r["owner_kind"],
            "entity_refs": json.loads(r["entity_refs_json"] or "[]"),
        }
        for r in rows
    ]


def being_name(store: AggregateStore, being_ref: str) -> str:
    return str(store.get(Being, resolve_being_id(store, being_ref)).name)


def list_spaces(store: AggregateStore, views: Views, being_ref: str | None = None) -> list[dict[str, Any]]:
    """Spaces with their members' names: all of them, or those `being_ref` is in."""
    views.ensure(names=["facts"])
    reads = views.facts
    rows = reads.spaces_of(resolve_being_id(store, being_ref)) if being_ref else reads.all_spaces()
    out = []
    for s in rows:
        members = sorted(being_name(store, m) for m in reads.space_members(s["id"]))
        out.append({"id": s["id"], "name": s["name"], "members": members, "created_at": s["created_at"]})
    return out
