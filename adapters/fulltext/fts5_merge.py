"""SQLite: merging a being's full-text index into one b-tree, in short steps (ADR 0020).

FTS5 writes each transaction's postings as a new b-tree (a segment) and merges segments only a few
at a time as they pile up. A term's lookup seeks every segment, and bm25 walks the postings of each
query term in every segment to count its rows, in every statement. A being's index grown note by
note keeps a dozen or more segments: merged into one, its full-text statements cost about a third
less at 100k rows.

FTS5's `optimize` does the merge in one transaction, which holds the memory view's write lock for the
whole index (a quarter of a second at 100k rows). Its `merge` command does it a bounded number of
pages at a time: a negative count puts every segment on one level and starts merging them, a
positive count goes on with a merge started. Each step is a write transaction of its own, so the
memory view's catch-up waits for one step at most.
"""

from __future__ import annotations

from collections.abc import Callable

from engram.adapters.fulltext.fts5_tables import exists, fts_registry, fts_table
from engram.projections import engine
from engram.projections.fulltext.port import IndexSize
from engram.projections.sql import ViewConnection, ViewDatabase

MERGE_PAGES = 200
"""Pages (4 kB) one merge step writes at most: ~25 ms, a few steps per 100k rows' index."""

MAX_STEPS = 10_000
"""A bound on the steps of one merge. Writes between steps can start new merges (FTS5 merges a level
that fills up), so the loop ends on a count, not only when a step finds nothing to do."""


def being_indexes(db: ViewDatabase, projection: engine.Projection) -> list[IndexSize]:
    """The beings' full-text tables of the memory view's active generation, in being order."""
    with db.read() as conn:
        nodes = engine.read_tables(conn, db, projection)["nodes"]
        if not exists(conn, fts_registry(nodes)):
            return []  # a rebuild's generation before its bulk load is indexed
        beings = [str(r["being_id"]) for r in conn.query(f"SELECT being_id FROM {fts_registry(nodes)}")]
        out = []
        for being_id in sorted(beings):
            table = fts_table(nodes, being_id)
            if exists(conn, table):
                # FTS5 keeps one `_docsize` row per indexed row: counting them reads no text.
                row = conn.query_one(f"SELECT count(*) AS n FROM {table}_docsize")
                out.append(IndexSize(being_id, table, int(row["n"]) if row else 0))
        return out


def merge(
    db: ViewDatabase,
    projection: engine.Projection,
    being_id: str,
    *,
    stopping: Callable[[], bool] = lambda: False,
) -> int:
    """Merge the being's full-text index of the active generation into one b-tree, `MERGE_PAGES` at a
    time, each step in its own write transaction. The steps that did any work: 0 when the index was
    already one b-tree, or when it is gone (a rebuild switched generations meanwhile). `stopping`:
    asked before each step; a merge stopped half way is a valid index, and the next one goes on."""
    steps = 0
    while steps < MAX_STEPS and not stopping() and _merge_step(db, projection, being_id, start=steps == 0):
        steps += 1
    return steps


def _merge_step(db: ViewDatabase, projection: engine.Projection, being_id: str, *, start: bool) -> bool:
    with db.write() as conn:
        table = fts_table(engine.read_tables(conn, db, projection)["nodes"], being_id)
        if not exists(conn, table):
            return False
        before = _total_changes(conn)
        pages = -MERGE_PAGES if start else MERGE_PAGES
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", [pages])
        # FTS5's documented test: a step that merged anything changed at least two rows.
        return _total_changes(conn) - before >= 2


def _total_changes(conn: ViewConnection) -> int:
    row = conn.query_one("SELECT total_changes() AS n")
    return int(row["n"]) if row else 0
