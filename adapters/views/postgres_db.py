"""Views as tables in PostgreSQL (same database as the log), one prefix per view."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from engram.adapters.storage_full import postgres_storage, reported_as_storage_full
from engram.projections.sql import Dialect

_QMARK = re.compile(r"\?")


def _pg(sql: str) -> str:
    # Projection SQL never holds a literal "?" or "%", so the translation is a plain substitution.
    return _QMARK.sub("%s", sql)


class _Conn:
    dialect: Dialect = "postgres"

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(_pg(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(_pg(sql), rows)

    def insert_many(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        # COPY streams the rows in one statement: several times faster than a pipelined executemany
        # of single-row INSERTs, in round trips and in server work.
        if rows:
            with (
                self._conn.cursor() as cur,
                cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(row)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return list(self._conn.execute(_pg(sql), params).fetchall())

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        return self._conn.execute(_pg(sql), params).fetchone()


class PostgresViews:
    """A connection pool shared by all views of one deployment; `database(name)` gives one view."""

    def __init__(self, conninfo: str, *, schema: str | None = None, max_size: int = 8) -> None:
        self.schema = schema
        params = conninfo_to_dict(conninfo)
        self.storage = postgres_storage(
            str(params.get("dbname", "")), str(params.get("host", "localhost")), str(params.get("port", 5432))
        )
        options = f"-c search_path={schema}" if schema else ""
        self.pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "autocommit": False, "options": options},
            open=True,
        )

    def database(self, name: str) -> PostgresViewDatabase:
        return PostgresViewDatabase(self, name)

    def close(self) -> None:
        self.pool.close()


class PostgresViewDatabase:
    dialect: Dialect = "postgres"

    def __init__(self, views: PostgresViews, name: str) -> None:
        self.views = views
        self.name = name

    @contextmanager
    def write(self) -> Iterator[_Conn]:
        """A write transaction. A full database rolls it back and is reported as `StorageFull`."""
        with (
            reported_as_storage_full(self.views.storage),
            self.views.pool.connection() as conn,
            conn.transaction(),
        ):
            # Writers of one view are serialised, like SQLite's BEGIN IMMEDIATE, so a rebuild's
            # switch and the live runner's batches never interleave.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"engram-view-write:{self.name}",))
            yield _Conn(conn)

    @contextmanager
    def read(self) -> Iterator[_Conn]:
        with self.views.pool.connection() as conn, conn.transaction():
            # One snapshot for the whole transaction, as SQLite's WAL gives: a read of several
            # statements (`ReadModels.snapshot`) sees one state. Read-only, it never fails to commit.
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield _Conn(conn)

    def table(self, logical: str, generation: int) -> str:
        return f"v_{self.name}_{logical}_g{generation}"

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Nothing to change per connection: the pool hands out a connection per transaction."""
        yield

    def analyze(self, tables: Sequence[str]) -> None:
        with reported_as_storage_full(self.views.storage), self.views.pool.connection() as conn:
            for table in tables:
                conn.execute(f"ANALYZE {table}")

    def close(self) -> None:
        """The pool belongs to `PostgresViews`."""
