"""The worker's full-text maintenance: merges a being's full-text index once it grew (ADR 0020)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from engram.projections.fulltext.port import IndexSize
from engram.services.views import Views

log = structlog.get_logger("engram.maintenance")

GROWTH = 0.1
"""Besides `min_new_rows`, an index is due once it grew by this share of its rows at its last merge:
a merge rewrites the whole index, so at most about ten rewrites of it for each doubling."""


class FullTextMaintenance:
    """Merges the full-text index of each being that gained at least `min_new_rows` rows, and a tenth
    of its size, since this instance last merged it (SQLite; nothing is ever due on PostgreSQL).

    Each merge writes in short steps (`FullTextIndex.merge`); call `run` from the worker's maintenance
    or an admin command, never from a request.
    """

    def __init__(self, views: Views, *, min_new_rows: int | None = None) -> None:
        self.views = views
        self.min_new_rows = views.settings.fulltext_merge_min_rows if min_new_rows is None else min_new_rows
        # table -> its rows after its last merge; the table's name carries the view's generation, so
        # a rebuild's new index is due again
        self._rows_after: dict[str, int] = {}

    def _indexes(self) -> list[IndexSize]:
        return self.views.fulltext.sizes(self.views.dbs["memory"], self.views.projections["memory"])

    def due(self) -> list[IndexSize]:
        out = []
        for index in self._indexes():
            last = self._rows_after.get(index.table, 0)
            if index.rows - last >= max(self.min_new_rows, int(last * GROWTH)):
                out.append(index)
        return out

    def run(
        self, *, force: bool = False, stopping: Callable[[], bool] = lambda: False
    ) -> list[dict[str, Any]]:
        """Merge what is due (every being's index with `force`); one report per index merged.
        `stopping`: asked between merge steps (the worker's stop)."""
        db, projection = self.views.dbs["memory"], self.views.projections["memory"]
        done = []
        for index in self._indexes() if force else self.due():
            if stopping():
                break
            started = time.perf_counter()
            steps = self.views.fulltext.merge(db, projection, index.being_id, stopping=stopping)
            self._rows_after[index.table] = index.rows
            report = {
                "being_id": index.being_id,
                "rows": index.rows,
                "steps": steps,
                "seconds": round(time.perf_counter() - started, 3),
            }
            log.info("full-text index merged", **report)
            done.append(report)
        return done
