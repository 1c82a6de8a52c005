"""Table definitions for SQL views, portable across SQLite and PostgreSQL.

How a batch reads and writes these tables (row caches, narrow updates) is the engine's
(`projections/engine/rows.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from engram.projections.sql import types

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
    narrow: tuple[str, ...] = ()
    """The columns that events change once a row exists. A row changed there only (not put with
    `whole=True`) is written by an UPDATE of those of them that differ from the row as read, not by
    an upsert of the whole row (`RowCache.write_narrow`): SQLite rewrites every index on a column an
    UPDATE sets, changed or not, and an upsert of a row's text makes full-text triggers compare it."""

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
