"""A view in its own SQLite file (WAL), so views never share a write lock or a tracking table."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from projections.sql import Dialect

log = structlog.get_logger(__name__)

BULK_CACHE_KIB = 128 * 1024
"""Page cache of a connection while it fills a generation (allocated as used, given back after)."""


STATEMENT_CACHE = 1024
"""Prepared statements a connection keeps. Preparing costs more than running most reads (a query's
neighbour statement: ~3.4 ms to prepare, ~1.1 ms to run), and one query uses a dozen texts."""


CHECKPOINT_PAUSE_S = 1.0
"""The least time between two checkpoints of one view database by its checkpointer thread."""

INLINE_CHECKPOINT_PAGES = 4000
"""The log length (pages, 4 KiB each) at which a commit checkpoints after all, as SQLite does at
1,000 by default. The log starts again from its beginning only when a write begins after a complete
checkpoint: under writes without a pause (a catch-up over a large backlog) the thread's checkpoints
never leave such a moment, and the log file would grow without end. The thread keeps sparser writes
(the request path) far below this length."""


class _Checkpointer:
    """Copies a view database's write-ahead log back into the database on a thread of its own (ADR 0016).

    SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000 pages: that
    commit (a view catching up after a recall, say) then copies ~4 MB and syncs the file, 10–30 ms
    instead of ~1. Here a commit only signals; the thread runs a PASSIVE checkpoint, which waits for
    no reader or writer, at most every `CHECKPOINT_PAUSE_S`. Commits checkpoint themselves only past
    `INLINE_CHECKPOINT_PAGES`. Started by the first commit of a process (again after a fork),
    stopped by `close`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commits = 0  # signalled so far
        self.covered = 0  # commits whose pages a checkpoint has since found in the log
        self.last: tuple[int, int, int] | None = None  # (busy, log frames, frames checkpointed)
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def committed(self) -> None:
        if self._thread is None or self._pid != os.getpid():
            self._start()
        self.commits += 1  # commits to one file are serial (its write lock)
        self._due.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._due, self._stop = threading.Event(), threading.Event()
            self._thread = threading.Thread(
                target=self._run, name=f"checkpoint-{self.path.stem}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._due.wait()
                if self._stop.is_set():
                    return
                self._due.clear()
                commits = self.commits
                try:
                    [row] = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.last = (int(row[0]), int(row[1]), int(row[2]))
                    self.covered = commits
                except sqlite3.Error as error:  # the next commit signals again
                    log.warning("view checkpoint failed", view=self.path.stem, error=str(error))
                if self._stop.wait(CHECKPOINT_PAUSE_S):
                    return
        finally:
            conn.close()

    def stop(self) -> None:
        with self._lock:
            thread = self._thread
            if thread is None or self._pid != os.getpid():
                return
            self._stop.set()
            self._due.set()
            thread.join(timeout=30)
            self._thread = None


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
        self._checkpointer = _Checkpointer(path)

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
            conn.execute(f"PRAGMA wal_autocheckpoint={INLINE_CHECKPOINT_PAGES}")  # see _Checkpointer
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
