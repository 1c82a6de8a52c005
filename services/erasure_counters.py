"""The counters an erased item leaves in the views (ADR 0089), for `ViewPurge.purge_items`: which
view keeps which, and the call that takes the item's part out (`projections/item_counters.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from engram.projections import item_counters
from engram.projections.sql import ViewConnection, ViewDatabase

if TYPE_CHECKING:
    from engram.services.views import Views

REBUILT_AFTER_ITEMS = ("message_search",)
"""Views whose counters over a being's items are not taken out in place but rebuilt after an item
erasure: BM25's message count and the position it was last moved at. The rebuild reads only the
view's topics (messages), not the nodes' events."""


def uncount_items(
    views: Views,
    name: str,
    conn: ViewConnection,
    db: ViewDatabase,
    generation: int,
    being_id: UUID,
    aggregate_ids: Sequence[UUID],
) -> int:
    """Take the erased aggregates' part out of the view's counters; how many rows changed."""
    if name == "memory":
        return item_counters.uncount_clusters(conn, db, generation, being_id, aggregate_ids)
    if name == "vectors":
        index = views.vectors_view.index
        return item_counters.uncount_centroids(conn, db, generation, being_id, aggregate_ids, index)
    return 0
