"""Table definitions for SQL views, portable across SQLite and PostgreSQL, and a per-batch row cache.

A batch of events is applied to rows held in memory: the rows it touches are
loaded with one query per table, handlers change them as plain dicts, and the
dirty rows are written back with one `executemany` upsert. That keeps a batch
to a handful of round trips on PostgreSQL and the handlers free of SQL.

A rebuild fills a generation that starts empty and that only it writes, so its
caches can be *complete*: they outlive a batch, a key they do not hold has no
row, nothing is read back, and rows never written before are inserted (COPY on
PostgreSQL) instead of upserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from typing import Any

from engram.projections.sql import ViewConnection, chunks, types

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
    keeps_read: bool = False
    """A batch's cache keeps a copy of each row it reads (`RowCache.read`): for a projection that
    writes only what changed in a row."""

    def ddl(self, physical: str, dialect: Any) -> list[str]:
        return [*self.table_ddl(physical, dialect), *self.index_ddl(physical)]

    def table_ddl(self, physical: str, dialect: Any) -> list[str]:
        """The table with its key and unique constraints: what its rows need to be written."""
        t = types(dialect)
        cols = [
            f"{c} {t[kind]}" + (" PRIMARY KEY" if c == self.key else "") for c, kind in self.columns.items()
        ]
        cols += [f"UNIQUE ({', '.join(u)})" for u in self.unique]
        return [f"CREATE TABLE IF NOT EXISTS {physical} ({', '.join(cols)})"]

    def index_ddl(self, physical: str) -> list[str]:
        """The secondary indexes, which only reads need (a rebuild adds them after its bulk load)."""
        statements = []
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

    @cached_property
    def bool_columns(self) -> tuple[str, ...]:
        return tuple(c for c, kind in self.columns.items() if kind == "bool")

    def normalise(self, row: dict[str, Any]) -> dict[str, Any]:
        """SQLite gives booleans back as 0/1."""
        for c in self.bool_columns:
            value = row.get(c)
            if value is not None:
                row[c] = bool(value)
        return row


_ABSENT: Any = object()


@dataclass
class RowCache:
    """The rows of one table that a batch reads and writes."""

    spec: TableSpec
    physical: str
    rows: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    dirty: dict[str, None] = field(default_factory=dict)
    """Keys written since the last flush, in the order first written: new rows are inserted in
    that order (the log's), so a table's rowids follow the log in every process and every rebuild."""
    complete: bool = False
    """Every row of the table is in `rows` (see the module's docstring): a key not held has no row."""
    stored: set[str] = field(default_factory=set)
    """With `complete`: the keys that have a row in the table, so that new rows are inserted."""
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    """With `spec.keeps_read`: a copy of each row as `prefetch` read it from the table. What a batch
    changed in a row is what differs from it (`memory.MemoryView.before_commit` writes only those
    columns)."""

    @classmethod
    def for_new_table(cls, spec: TableSpec, physical: str) -> RowCache:
        """A complete cache for an empty table that only its owner writes (a generation being rebuilt)."""
        return cls(spec, physical, complete=True)

    def prefetch(self, conn: ViewConnection, keys: Iterable[str]) -> None:
        if self.complete:
            return
        missing = [k for k in dict.fromkeys(keys) if k not in self.rows]
        for part in chunks(missing, MAX_IN_LIST):
            marks = ", ".join("?" for _ in part)
            found = conn.query(
                f"SELECT {self.spec.select_list} FROM {self.physical} WHERE {self.spec.key} IN ({marks})",
                list(part),
            )
            keep = self.spec.keeps_read
            for row in found:
                key = str(row[self.spec.key])
                self.rows[key] = self.spec.normalise(row)
                if keep:
                    self.read[key] = dict(row)
            for k in part:
                self.rows.setdefault(k, None)

    def get(self, conn: ViewConnection, key: str) -> dict[str, Any] | None:
        row = self.rows.get(key, _ABSENT)
        if row is _ABSENT:
            if self.complete:
                return None
            self.prefetch(conn, [key])
            row = self.rows[key]
        return row  # type: ignore[no-any-return]

    def put(self, row: dict[str, Any]) -> None:
        key = str(row[self.spec.key])
        self.rows[key] = row
        self.dirty[key] = None

    def delete(self, key: str) -> None:
        self.rows[key] = None
        self.dirty[key] = None

    def written(self, keys: Iterable[str]) -> None:
        """`keys` were written by other means (a narrower UPDATE): the flush leaves them alone."""
        for key in keys:
            self.dirty.pop(key, None)

    def flush(self, conn: ViewConnection) -> None:
        if not self.dirty:
            return
        spec = self.spec
        cols = list(spec.columns)
        width = len(cols)
        pick = itemgetter(*cols) if width > 1 else (lambda row: (row[cols[0]],))
        upserts: list[Sequence[Any]] = []
        inserts: list[Sequence[Any]] = []
        deletes: list[Sequence[Any]] = []
        complete, stored = self.complete, self.stored
        for key in self.dirty:
            self.read.pop(key, None)  # written whole: a later change is diffed against nothing
            row = self.rows[key]
            if row is None:
                if not complete or key in stored:
                    deletes.append((key,))
                    stored.discard(key)
                continue
            try:
                values = pick(row)
            except KeyError:  # a column the handlers never set is NULL
                values = tuple(row.get(c) for c in cols)
            if len(row) > width:
                # Handlers may leave notes for `before_commit` in a row; a row that outlives its batch
                # must look like one read back from the table.
                for extra in [k for k in row if k not in spec.columns]:
                    del row[extra]
            if not complete or key in stored:
                upserts.append(values)
            else:
                inserts.append(values)
                stored.add(key)
        if deletes:
            conn.executemany(f"DELETE FROM {self.physical} WHERE {spec.key} = ?", deletes)
        if inserts:
            conn.insert_many(self.physical, cols, inserts)
        if upserts:
            updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != spec.key)
            conn.executemany(
                f"INSERT INTO {self.physical} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
                f"ON CONFLICT ({spec.key}) DO UPDATE SET {updates}",
                upserts,
            )
        self.dirty.clear()

    def trim(self, max_rows: int) -> None:
        """Forget every row once more than `max_rows` are held, to bound a long rebuild's memory.

        Call between batches (nothing dirty); the cache is no longer complete, and later batches read
        the rows they need back from the table.
        """
        if len(self.rows) > max_rows and not self.dirty:
            self.rows.clear()
            self.read.clear()
            self.stored.clear()
            self.complete = False
