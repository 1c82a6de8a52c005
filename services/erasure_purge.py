"""The targeted purge of an erasure (ADR 0077): a forgotten being's rows, full-text entries and
vectors deleted from every view, without rebuilding the views of the other beings.

Once a being's key is destroyed its events read as `ErasedContent`, which no projection handles: a
rebuild would leave out exactly the rows found here by their being column
(`projections/being_rows.py`). Deleting them in each view's write transaction, at the position the
view has reached, gives what a rebuild gives, and the tracking positions stay as they are: events
after them are read as erased, so catching up adds nothing of the being back.

Two entry points, for `forget being` and for the per-item erasures (a note, a message, a fact,
a subject's items):
- `purge_being(being_id)`: every row of the being;
- `purge_items(being_id, aggregate_ids)`: the rows of those aggregates of the being, by the columns
  `ITEM_COLUMNS` names. The counters of a cluster the erased nodes stood in are taken out in place
  (`erasure_counters`, ADR 0089); the messages' BM25 count is left to the caller (ADR 0089 rebuilds
  that view).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

import structlog

from engram.projections import being_rows, engine
from engram.services.erasure_counters import uncount_items
from engram.services.errors import Conflict
from engram.services.ports import TableScrub

if TYPE_CHECKING:
    from engram.services.views import Views

log = structlog.get_logger(__name__)

MEMORY_VIEW = "memory"
"""The view whose nodes a full-text index covers (`Views.fulltext`)."""


@dataclass
class PurgeReport:
    """What a purge deleted: rows by view and table, vector points by collection, views rebuilt
    instead (a table `being_rows` does not place), tables rewritten to drop dead tuples."""

    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    points: dict[str, int] = field(default_factory=dict)
    rebuilt: list[str] = field(default_factory=list)
    scrubbed: list[str] = field(default_factory=list)

    @property
    def views(self) -> list[str]:
        return sorted(self.rows)

    @property
    def row_count(self) -> int:
        return sum(n for tables in self.rows.values() for n in tables.values())

    @property
    def point_count(self) -> int:
        return sum(self.points.values())


class ViewPurge:
    def __init__(self, views: Callable[[], Views], scrub: TableScrub) -> None:
        self.views = views
        self.scrub = scrub

    def purge_being(
        self, being_id: UUID, *, progress: Callable[[str, int, int], None] | None = None
    ) -> PurgeReport:
        """Every row of the being in every view, its full-text table and its vector points."""
        return self._purge(being_id, None, progress)

    def purge_items(
        self,
        being_id: UUID,
        aggregate_ids: Sequence[UUID],
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> PurgeReport:
        """The rows (and points) of these aggregates of the being. Call it after their events read
        as erased (their key destroyed), as `purge_being` is."""
        return self._purge(being_id, list(aggregate_ids), progress)

    def _purge(
        self,
        being_id: UUID,
        aggregate_ids: list[UUID] | None,
        progress: Callable[[str, int, int], None] | None,
    ) -> PurgeReport:
        views = self.views()
        report = PurgeReport()
        names = views.names()
        touched: list[str] = []
        for done, name in enumerate(names):
            projection = views.projections[name]
            if not being_rows.covered(projection):
                # A table this module does not place: rebuilding the view is right without knowing it.
                log.warning("erasure: view has a table the purge does not know; rebuilding it", view=name)
                views.rebuild(name)
                report.rebuilt.append(name)
                continue
            lock = views.lock(name, "rebuild")  # no rebuild of the view meanwhile: it could read stale rows
            if not lock.try_acquire():
                raise Conflict(f"a rebuild of {name} is running; run the erasure again once it is done")
            try:
                rows, points, tables = self._purge_view(views, name, being_id, aggregate_ids)
            finally:
                lock.release()
            if rows:
                report.rows[name] = rows
                touched += tables
            for collection, n in points.items():
                report.points[collection] = report.points.get(collection, 0) + n
            if progress is not None:
                progress(name, done + 1, len(names))
        report.scrubbed = self.scrub.scrub_tables(touched)
        log.info(
            "erasure: views purged",
            being_id=str(being_id),
            items=None if aggregate_ids is None else len(aggregate_ids),
            rows=report.row_count,
            points=report.point_count,
            rebuilt=report.rebuilt,
        )
        return report

    def _purge_view(
        self, views: Views, name: str, being_id: UUID, aggregate_ids: list[UUID] | None
    ) -> tuple[dict[str, int], dict[str, int], list[str]]:
        db, projection = views.dbs[name], views.projections[name]
        points: dict[str, int] = {}
        with db.write() as conn:
            generation = engine.active_generation(conn, db, projection)
            found = (
                being_rows.vector_points(conn, db, projection, generation, being_id)
                if projection.keeps_state_outside_sql
                else {}
            )
            if aggregate_ids is not None:
                found = being_rows.item_vector_points(found, aggregate_ids)
            if name == MEMORY_VIEW:
                nodes = db.table("nodes", generation)
                if aggregate_ids is None:
                    views.fulltext.drop_being(conn, nodes, being_id)
                else:
                    keys = being_rows.item_keys(conn, db, "nodes", generation, being_id, aggregate_ids)
                    views.fulltext.forget(conn, nodes, keys, stored=True)
                    views.fulltext.compact_after_erasure(conn, nodes, being_id)
            if aggregate_ids is not None:
                # The erased nodes' part of their clusters' counters, taken out before their rows go.
                uncount_items(views, name, conn, db, generation, being_id, aggregate_ids)
            rows = being_rows.delete_rows(conn, db, projection, generation, being_id, aggregate_ids)
            if found:
                # Inside the transaction, as a batch's `before_commit`: if the index fails, the rows
                # stay and the erasure can be run again.
                index = views.vectors_view.index
                for collection, ids in found.items():
                    index.delete(collection, ids)
                    points[collection] = len(ids)
        tables = [db.table(t, generation) for t in rows]
        return rows, points, tables
