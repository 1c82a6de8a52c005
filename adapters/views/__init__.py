"""SQL view databases: one SQLite file per view, or tables in PostgreSQL."""

from engram.adapters.views.postgres_db import PostgresViews
from engram.adapters.views.sqlite_db import SQLiteViewDatabase

__all__ = ["PostgresViews", "SQLiteViewDatabase"]
