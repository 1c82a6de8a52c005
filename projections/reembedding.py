"""Reads for `engram embeddings migrate` (ADR 0071): which stored vectors are of another model."""

from __future__ import annotations

from typing import Any
from uuid import UUID

PENDING = {
    "node": ("vectors", "vector_nodes", "being_id"),
    "note": ("note_search", "note_docs", "being_id"),
    "fact": ("fact_search", "fact_docs", "owner_id"),
}
"""Per kind: the view, its table and the column of the being an item's events are scoped to."""

_COLLECTIONS = (
    ("vectors", "collections"),
    ("note_search", "note_collections"),
    ("fact_search", "fact_collections"),
)

VIEWS = tuple(view for view, _, _ in PENDING.values())


def not_of_model(read: Any, model: str) -> dict[str, list[tuple[UUID, UUID]]]:
    """Per kind, (being, item) of the items holding a vector of a model other than `model`."""
    out: dict[str, list[tuple[UUID, UUID]]] = {}
    for kind, (view, table, being) in PENDING.items():
        with read.reading(view) as (conn, tables):
            rows = conn.query(
                f"SELECT id, {being} AS being FROM {tables[table]} "
                "WHERE model IS NOT NULL AND model <> ? ORDER BY id",
                [model],
            )
        out[kind] = [(UUID(str(r["being"])), UUID(str(r["id"]))) for r in rows]
    return out


def stored_models(read: Any) -> list[str]:
    """Every model that some collection of nodes, centroids, notes or facts is of."""
    found: set[str] = set()
    for view, table in _COLLECTIONS:
        with read.reading(view) as (conn, tables):
            found.update(str(r["model"]) for r in conn.query(f"SELECT model FROM {tables[table]}"))
    return sorted(found)
