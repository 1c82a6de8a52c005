"""What the views holding vectors do when `EmbeddingModels.Switched` says one model is live (ADR 0071).

Each of them (nodes and centroids, notes, facts) keeps a collection per model and a table row per
collection; on the switch, the rows and the collections of the other models go, in live batches and
in rebuilds alike, so that a rebuilt view has the same collections as the live one.
"""

from __future__ import annotations

from typing import Any

from engram.projections.engine import Batch
from engram.projections.engine.rows import RowCache


def rows_of_other_models(batch: Batch, cache: RowCache, keep: str) -> list[dict[str, Any]]:
    """The rows of `cache`'s table (as this batch left them) whose `model` is not `keep`."""
    rows: dict[str, dict[str, Any]] = {
        str(r[cache.spec.key]): dict(r) for r in batch.conn.query(f"SELECT * FROM {cache.physical}")
    }
    for key, row in cache.rows.items():
        if row is None:
            rows.pop(key, None)
        else:
            rows[key] = row
    return [r for r in rows.values() if r["model"] != keep]


def drop_other_models(batch: Batch, cache: RowCache, keep: str, index: Any, name_of: Any) -> list[str]:
    """Delete the rows of `cache` of models other than `keep` and drop their collections of this
    batch's generation (`name_of(row)`); the names dropped."""
    dropped = []
    for row in rows_of_other_models(batch, cache, keep):
        cache.delete(str(row[cache.spec.key]))
        name = name_of(row)
        index.drop_collection(name)
        dropped.append(name)
    return dropped
