"""PostgreSQL plans a view's reads from its statistics: a table filled in bulk (a rebuild, a large
catch-up) gets them at once, not when autovacuum comes by a minute later (`ViewDatabase.analyze`)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from engram.projections import engine
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from tests.support import SeededIds, SteppingClock, postgres_schema, require_postgres


def _analyzed(e: Engram, url: str, view: str, logical: str) -> tuple[str, bool]:
    """The physical table of the serving generation, and whether an ANALYZE (not autovacuum's) ran."""
    db, projection = e.views.dbs[view], e.views.projections[view]
    table = db.table(logical, engine.status(db, projection).generation)
    schema = url.split("schema=")[1]
    with psycopg.connect(url.split("?")[0]) as conn:
        row = conn.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
            [schema, table],
        ).fetchone()
    return table, row is not None and row[0] is not None


def test_a_bulk_catch_up_and_a_rebuild_leave_planner_statistics(tmp_path: Path) -> None:
    with postgres_schema(require_postgres()) as url:
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=url,
            embedder="hashing",
            llm="none",
            projection_batch_size=10,
        )
        e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())
        try:
            e.beings.register("Aria")
            e.views.ensure(names=["notes"])
            _, before = _analyzed(e, url, "notes", "notes")
            assert not before
            e.notes.take_many("Aria", [NoteInput(kind="log", text=f"log {i}") for i in range(30)])
            e.views.ensure(names=["notes"])  # 3 batches behind: no bulk, no ANALYZE
            assert not _analyzed(e, url, "notes", "notes")[1]
            e.notes.take_many("Aria", [NoteInput(kind="log", text=f"more {i}") for i in range(300)])
            e.views.ensure(names=["notes"])  # 30 batches behind: caught up in bulk
            assert _analyzed(e, url, "notes", "notes")[1]

            e.views.rebuild("notes")
            table, analyzed = _analyzed(e, url, "notes", "notes")
            assert table.endswith("_g2") and analyzed, "the rebuilt generation has its statistics"
            assert len(e.listing.notes("Aria", limit=1000)) == 330
        finally:
            e.close()
