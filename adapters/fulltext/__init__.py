"""`FullTextIndex` adapters (the `projections.fulltext.port.FullTextIndex` port) and their factory.

- `SQLiteFullText`: FTS5, a table per being in the memory view's SQLite file (the default);
- `PostgresFullText`: a generated `tsvector` column with a GIN index (`ENGRAM_DATABASE_URL`).

How a caller's text becomes a parameter of their statements: `patterns.py`.
"""

from __future__ import annotations

from engram.adapters.fulltext.postgres_tsvector import PostgresFullText
from engram.adapters.fulltext.sqlite_fts5 import SQLiteFullText
from engram.projections.fulltext.port import FullTextIndex
from engram.projections.sql import Dialect

__all__ = ["PostgresFullText", "SQLiteFullText", "build_full_text_index"]


def build_full_text_index(dialect: Dialect) -> FullTextIndex:
    """The full-text index of the views' store: FTS5 on SQLite, `tsvector` on PostgreSQL."""
    return PostgresFullText() if dialect == "postgres" else SQLiteFullText()
