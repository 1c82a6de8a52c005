"""A view in its own SQLite file (WAL), so views never share a write lock or a tracking table."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from adapters.sqlite_checkpoints import INLINE_CHECKPOINT_PAGES, Checkpointer
from projections.sql import Dialect

log = structlog.get_logger(__name__)

BULK_CACHE_KIB = 128 * 1024
"""Page cache of a connection while it fills a generation (allocated as used, given back after)."""


STATEMENT_CACHE = 1024
"""Prepared statements a connection keeps. Preparing costs more than running most reads (a query's
neighbour statement: ~3.4 ms to prepare, ~1.1 ms to run), and one query uses a dozen texts."""


class _Conn:
    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def insert_many(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        marks = ", ".join("?" for _ in columns)
        self._conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._conn.execute(sql, params)
        cols = [d[0] for d in cur.description or ()]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None


class SQLiteViewDatabase:
    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._checkpointer = Checkpointer(path)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE for writers).
            conn = sqlite3.connect(
                self.path,
                timeout=30.0,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=STATEMENT_CACHE,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(f"PRAGMA wal_autocheckpoint={INLINE_CHECKPOINT_PAGES}")  # see Checkpointer
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[_Conn]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _Conn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._checkpointer.committed()

    @contextmanager
    def read(self) -> Iterator[_Conn]:
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            yield _Conn(conn)
        finally:
            conn.execute("ROLLBACK")

    def table(self, logical: str, generation: int) -> str:
        return f"{logical}_g{generation}"

    @contextmanager
    def bulk(self) -> Iterator[None]:
        conn = self._connection()
        (cache_size,) = conn.execute("PRAGMA cache_size").fetchone()
        # A rebuild's transactions are large: with the default 2 MB page cache, b-tree pages written
        # early in a transaction are evicted and written out (and read back) again before it commits.
        conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA cache_size = {int(cache_size)}")

    def close(self) -> None:
        self._checkpointer.stop()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
