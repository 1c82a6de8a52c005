"""A view in its own SQLite file (WAL), so views never share a write lock or a tracking table."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from engram.adapters.sqlite_checkpoints import INLINE_CHECKPOINT_PAGES, Checkpointer
from engram.adapters.storage_full import reported_as_storage_full
from engram.projections.sql import Dialect

log = structlog.get_logger(__name__)

BULK_CACHE_KIB = 128 * 1024
"""Page cache of a connection while it fills a generation (allocated as used, given back after)."""


CONNECTION_CACHE_KIB = 256 * 1024
"""Page cache of each of a view's cached connections (ADR 0023; `ENGRAM_VIEW_CACHE_MIB`)."""

CACHED_CONNECTIONS = 4
"""Connections per view that keep that cache (`ENGRAM_VIEW_CACHED_CONNECTIONS`)."""

HEAP_BUDGET_KIB = 256 * 1024
"""SQLite's heap over every connection of the process (`ENGRAM_SQLITE_HEAP_MIB`, ADR 0028). Past it, a
connection's page cache that needs one more page reuses its least recently used one instead of
growing: the caches of ADR 0023 share one budget, however many connections the requests open."""


def limit_sqlite_heap(kib: int) -> None:
    """Set the process's SQLite heap budget (`PRAGMA soft_heap_limit` is one value per process: the
    last call wins)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"PRAGMA soft_heap_limit = {int(kib) * 1024}")
    finally:
        conn.close()


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


WAL_SWITCH_ATTEMPTS = 200


def _use_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode (it stays so). The switch needs an exclusive lock, and SQLite refuses
    it at once, without its busy handler, while another connection opening the new file side by side
    holds a shared one: such a refusal is retried."""
    for attempt in range(WAL_SWITCH_ATTEMPTS):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_SWITCH_ATTEMPTS - 1:
                raise
            time.sleep(0.01)


class _Pool:
    """A view's connections, lent one transaction at a time.

    The first `cached` connections keep a page cache of `cache_kib` (SQLite allocates it as pages are
    read): the hot pages of a being's indexes stay in the process, where the kernel cannot drop them
    between requests (ADR 0023). Requests beyond those get connections with SQLite's default cache.
    Idle connections are lent most recently returned first, the cached ones before the others: a
    single caller gets the same connection every time, whose cache its own writes keep valid.
    """

    def __init__(
        self, open_connection: Callable[[], sqlite3.Connection], cached: int, cache_kib: int
    ) -> None:
        self._open = open_connection
        self._cached = cached
        self._cache_kib = cache_kib
        self._lock = threading.Lock()
        self._idle_cached: list[sqlite3.Connection] = []
        self._idle_other: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._is_cached: set[int] = set()  # ids of the connections with the large cache
        self._cached_count = 0

    def take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle_cached:
                return self._idle_cached.pop()
            if self._idle_other:
                return self._idle_other.pop()
            cached = self._cached_count < self._cached
            self._cached_count += cached
        try:
            conn = self._open()  # outside the lock: opening takes a while
            if cached:
                conn.execute(f"PRAGMA cache_size = {-self._cache_kib}")
        except BaseException:
            with self._lock:
                self._cached_count -= cached
            raise
        with self._lock:
            if cached:
                self._is_cached.add(id(conn))
            self._all.append(conn)
        return conn

    def give(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:  # a COMMIT that failed: the next borrower must start clean
            conn.execute("ROLLBACK")
        with self._lock:
            (self._idle_cached if id(conn) in self._is_cached else self._idle_other).append(conn)

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
            self._idle_cached.clear()
            self._idle_other.clear()
            self._is_cached.clear()
            self._cached_count = 0
        for conn in conns:
            conn.close()


class SQLiteViewDatabase:
    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: Path,
        name: str,
        *,
        cached_connections: int = CACHED_CONNECTIONS,
        cache_kib: int = CONNECTION_CACHE_KIB,
        heap_kib: int = HEAP_BUDGET_KIB,
    ) -> None:
        self.path = path
        self.name = name
        path.parent.mkdir(parents=True, exist_ok=True)
        limit_sqlite_heap(heap_kib)
        self._pool = _Pool(self._open, cached_connections, cache_kib)
        self._local = threading.local()  # a connection pinned to a thread by `bulk`
        self._checkpointer = Checkpointer(path)

    def _open(self) -> sqlite3.Connection:
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE for writers).
        conn = sqlite3.connect(
            self.path,
            timeout=30.0,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=STATEMENT_CACHE,
        )
        conn.execute("PRAGMA busy_timeout=30000")
        _use_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint={INLINE_CHECKPOINT_PAGES}")  # see Checkpointer
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        pinned: sqlite3.Connection | None = getattr(self._local, "pinned", None)
        if pinned is not None:
            yield pinned
            return
        conn = self._pool.take()
        try:
            yield conn
        finally:
            self._pool.give(conn)

    @contextmanager
    def write(self) -> Iterator[_Conn]:
        """A write transaction. A full disk rolls it back and is reported as `StorageFull`."""
        with reported_as_storage_full(self.path), self._connection() as conn:
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
        with self._connection() as conn:
            conn.execute("BEGIN")
            try:
                yield _Conn(conn)
            finally:
                conn.execute("ROLLBACK")

    def analyze(self, tables: Sequence[str]) -> None:
        """Nothing: SQLite plans these views' queries from their indexes alone (the plans are pinned by
        tests), and `ANALYZE` would read every row of a large table."""

    def table(self, logical: str, generation: int) -> str:
        return f"{logical}_g{generation}"

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """The block's transactions on this thread run on one connection of its own, with a large
        page cache, closed when the block ends.

        A rebuild's transactions are large: with a small page cache, b-tree pages written early in a
        transaction are evicted and written out (and read back) again before it commits. Its own
        connection keeps the pooled ones' caches to what reads brought in: a pooled connection that
        had written a rebuild served `query` ~0.4 ms slower afterwards (ADR 0023's addendum), and the
        block's pages go with its connection.
        """
        if getattr(self._local, "pinned", None) is not None:  # a block inside another keeps its pin
            yield
            return
        conn = self._open()
        try:
            conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")  # negative: KiB
            self._local.pinned = conn
            try:
                yield
            finally:
                self._local.pinned = None
        finally:
            conn.close()  # a transaction still open (a failed COMMIT) is rolled back by the close

    def close(self) -> None:
        self._checkpointer.stop()
        self._pool.close()


class SQLiteViews:
    """Every view in a SQLite file of its own under one directory (the `services.ports.ViewStorage`
    port on the embedded default)."""

    def __init__(
        self,
        directory: Path,
        *,
        cached_connections: int = CACHED_CONNECTIONS,
        cache_kib: int = CONNECTION_CACHE_KIB,
        heap_kib: int = HEAP_BUDGET_KIB,
    ) -> None:
        self.directory = directory
        self.cached_connections = cached_connections
        self.cache_kib = cache_kib
        self.heap_kib = heap_kib

    def database(self, name: str) -> SQLiteViewDatabase:
        return SQLiteViewDatabase(
            self.directory / f"{name}.sqlite3",
            name,
            cached_connections=self.cached_connections,
            cache_kib=self.cache_kib,
            heap_kib=self.heap_kib,
        )

    def close(self) -> None:
        """Each view's database closes its own file."""
