"""SQL view databases: one SQLite file per view, or tables in PostgreSQL."""

from adapters.views.postgres_db import PostgresViews
from adapters.views.sqlite_db import SQLiteViewDatabase

__all__ = ["PostgresViews", "SQLiteViewDatabase"]
