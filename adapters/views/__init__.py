"""SQL view databases: one SQLite file per view, or tables in PostgreSQL.

Each is imported by the deployment that uses it: psycopg costs a fifth of a second to import.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.adapters.views.postgres_db import PostgresViews
    from engram.adapters.views.sqlite_db import SQLiteViewDatabase

__all__ = ["PostgresViews", "SQLiteViewDatabase"]


def __getattr__(name: str) -> Any:
    if name == "PostgresViews":
        from engram.adapters.views.postgres_db import PostgresViews

        return PostgresViews
    if name == "SQLiteViewDatabase":
        from engram.adapters.views.sqlite_db import SQLiteViewDatabase

        return SQLiteViewDatabase
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
