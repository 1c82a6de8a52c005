"""`TableScrub` (ADR 0077): the view tables an erasure deleted rows from, rewritten so that no
dead tuple (nor free space that held one) is left in their files.

PostgreSQL: `VACUUM FULL` writes each table and its indexes (and TOAST) into new files and unlinks
the old ones; a plain VACUUM only marks dead tuples' space reusable, its bytes stay until
overwritten. `ANALYZE` is not run: the table's statistics rows in `pg_statistic` would be replaced
and the old ones, which may quote values of the deleted rows, left dead in its files (ADR 0077).
SQLite: nothing here; the erasure VACUUMs every view file (`ShreddingStorage.scrub`).
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
import structlog

log = structlog.get_logger(__name__)


class PostgresTableScrub:
    def __init__(self, conninfo: str, schema: str | None) -> None:
        self.conninfo = conninfo
        self.schema = schema

    def scrub_tables(self, tables: Sequence[str]) -> list[str]:
        if not tables:
            return []
        done = []
        options = f"-c search_path={self.schema}" if self.schema else ""
        # Autocommit: VACUUM never runs inside a transaction.
        with psycopg.connect(self.conninfo, autocommit=True, options=options) as conn:
            for table in tables:
                conn.execute(f"VACUUM FULL {table}".encode())  # names from the views' specs
                done.append(table)
        log.info("erasure: view tables rewritten", tables=len(done))
        return done


class NoTableScrub:
    """SQLite: the erasure VACUUMs whole view files instead."""

    def scrub_tables(self, tables: Sequence[str]) -> list[str]:
        return []
