"""The port through which projections write and read their SQL views.

SQL in projections is written once for both engines: `?` placeholders (the
PostgreSQL adapter translates them), `ON CONFLICT … DO UPDATE` upserts, and the
column types below. Table names carry the view's *generation* (`nodes_g3`), so a
rebuild fills new tables while the old ones keep serving reads, and a one-row
pointer switches readers atomically.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgres"]

COLUMN_TYPES: dict[Dialect, dict[str, str]] = {
    "sqlite": {
        "id": "TEXT",
        "text": "TEXT",
        "int": "INTEGER",
        "float": "REAL",
        "bool": "INTEGER",
        "blob": "BLOB",
    },
    "postgres": {
        "id": "TEXT",
        "text": "TEXT",
        "int": "BIGINT",
        "float": "DOUBLE PRECISION",
        "bool": "BOOLEAN",
        "blob": "BYTEA",
    },
}

Row = Mapping[str, Any]


class ViewConnection(Protocol):
    """A connection inside one transaction."""

    dialect: Dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def insert_many(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows that are known not to exist yet (PostgreSQL streams them with COPY)."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None: ...


class ViewDatabase(Protocol):
    """One view's database: a SQLite file of its own, or a table prefix in PostgreSQL."""

    dialect: Dialect
    name: str

    def write(self) -> AbstractContextManager[ViewConnection]:
        """A write transaction, serialised against the view's other writers; commits on exit."""
        ...

    def read(self) -> AbstractContextManager[ViewConnection]:
        """A read-only snapshot."""
        ...

    def table(self, logical: str, generation: int) -> str:
        """The physical name of a logical table in a generation (PostgreSQL adds the view's prefix)."""
        ...

    def bulk(self) -> AbstractContextManager[None]:
        """Connection settings for a rebuild filling a generation that nobody reads yet, undone on exit.

        Only what keeps every commit as durable and atomic as usual: a rebuild's switch commits
        through the same connection.
        """
        ...

    def analyze(self, tables: Sequence[str]) -> None:
        """Refresh the query planner's statistics of these physical tables after a bulk fill (a
        rebuild's, a large catch-up's): PostgreSQL plans from statistics that autovacuum refreshes a
        minute or so later, and until then read a fresh table as nearly empty (a being's newest 20
        notes of 100k: a heap scan and a sort, 50 ms, instead of an index walk, 0.04 ms)."""
        ...

    def close(self) -> None: ...


def types(dialect: Dialect) -> dict[str, str]:
    return COLUMN_TYPES[dialect]


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def as_bool(value: Any) -> bool:
    return bool(value)


WriteCM = AbstractContextManager[ViewConnection]
