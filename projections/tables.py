"""Table definitions for SQL views, portable across SQLite and PostgreSQL, and a per-batch row cache.

A batch of events is applied to rows held in memory: the rows it touches are
loaded with one query per table, handlers change them as plain dicts, and the
dirty rows are written back with one `executemany` upsert. That keeps a batch
to a handful of round trips on PostgreSQL and the handlers free of SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from projections.sql import ViewConnection, chunks, types

MAX_IN_LIST = 500


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    where: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """A logical table. The key is a single column; `columns` maps names to portable types."""

    name: str
    columns: dict[str, str]
    key: str = "id"
    indexes: tuple[Index, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()

    def ddl(self, physical: str, dialect: Any) -> list[str]:
        t = types(dialect)
        cols = [
            f"{c} {t[kind]}" + (" PRIMARY KEY" if c == self.key else "") for c, kind in self.columns.items()
        ]
        cols += [f"UNIQUE ({', '.join(u)})" for u in self.unique]
        statements = [f"CREATE TABLE IF NOT EXISTS {physical} ({', '.join(cols)})"]
        for ix in self.indexes:
            where = f" WHERE {ix.where}" if ix.where else ""
            statements.append(
                f"CREATE INDEX IF NOT EXISTS {physical}_{ix.name} "
                f"ON {physical} ({', '.join(ix.columns)}){where}"
            )
        return statements

    @property
    def select_list(self) -> str:
        return ", ".join(self.columns)

    def normalise(self, row: dict[str, Any]) -> dict[str, Any]:
        """SQLite gives booleans back as 0/1."""
        for c, kind in self.columns.items():
            if kind == "bool" and row.get(c) is not None:
                row[c] = bool(row[c])
        return row


@dataclass
class RowCache:
    """The rows of one table that a batch reads and writes."""

    spec: TableSpec
    physical: str
    rows: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)

    def prefetch(self, conn: ViewConnection, keys: Iterable[str]) -> None:
        missing = [k for k in dict.fromkeys(keys) if k not in self.rows]
        for part in chunks(missing, MAX_IN_LIST):
            marks = ", ".join("?" for _ in part)
            found = conn.query(
                f"SELECT {self.spec.select_list} FROM {self.physical} WHERE {self.spec.key} IN ({marks})",
                list(part),
            )
            for row in found:
                self.rows[str(row[self.spec.key])] = self.spec.normalise(row)
            for k in part:
                self.rows.setdefault(k, None)

    def get(self, conn: ViewConnection, key: str) -> dict[str, Any] | None:
        if key not in self.rows:
            self.prefetch(conn, [key])
        return self.rows[key]

    def put(self, row: dict[str, Any]) -> None:
        key = str(row[self.spec.key])
        self.rows[key] = row
        self.dirty.add(key)

    def delete(self, key: str) -> None:
        self.rows[key] = None
        self.dirty.add(key)

    def flush(self, conn: ViewConnection) -> None:
        if not self.dirty:
            return
        cols = list(self.spec.columns)
        upserts: list[Sequence[Any]] = []
        deletes: list[Sequence[Any]] = []
        for key in self.dirty:
            row = self.rows[key]
            if row is None:
                deletes.append((key,))
            else:
                upserts.append([row.get(c) for c in cols])
        if deletes:
            conn.executemany(f"DELETE FROM {self.physical} WHERE {self.spec.key} = ?", deletes)
        if upserts:
            updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != self.spec.key)
            conn.executemany(
                f"INSERT INTO {self.physical} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
                f"ON CONFLICT ({self.spec.key}) DO UPDATE SET {updates}",
                upserts,
            )
        self.dirty.clear()
