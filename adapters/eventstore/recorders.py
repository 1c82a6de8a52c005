"""The library's recorders, with commits that may skip the wait for the disk (ADR 0018).

A save passes `durable=False` for events whose loss in a power cut costs nothing that matters: a
recall's reactivations (a touch, as a file system's access time is). Such a commit is atomic and
survives a crash of the process; only a power cut (or an OS crash) within a moment of it may lose it,
and then with everything committed after it, never alone:

- SQLite: the commit runs with `PRAGMA synchronous=NORMAL` instead of `FULL`, so it is not followed by
  an fsync of the write-ahead log. The log of one database file is replayed in order and stops at the
  first frame that did not reach the disk: what survives is a prefix of the commits. Snapshots live in
  the same file and are a cache of the events, so their commits never wait for the disk either.
- PostgreSQL: `SET LOCAL synchronous_commit TO OFF`, the documented form of the same trade. The
  server's write-ahead log is one stream for the whole cluster, views included.

Every other save waits for the disk as before (`synchronous=FULL`, SQLite's default, which the library
keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from eventsourcing.sqlite import (
    SQLiteAggregateRecorder,
    SQLiteApplicationRecorder,
    SQLiteDatastore,
    SQLiteFactory,
)
from psycopg import Cursor
from psycopg.rows import DictRow

DURABLE = "durable"
"""The keyword a save passes down to the recorder (`EventLog.save(..., durable=False)`)."""


def _insert_relaxed(
    recorder: SQLiteAggregateRecorder, stored_events: Sequence[StoredEvent], **kwargs: Any
) -> Sequence[int] | None:
    """`insert_events` in one transaction committed without an fsync. SQLite refuses to change the
    setting inside a transaction, so it is set on the connection before `BEGIN` and put back after."""
    datastore: SQLiteDatastore = recorder.datastore
    with datastore.get_connection(commit=True) as conn:
        with conn.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=NORMAL")
        try:
            with conn.transaction(commit=True) as c:
                return recorder._insert_events(c, stored_events, **kwargs)
        finally:
            with conn.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=FULL")


class SQLiteEventRecorder(SQLiteApplicationRecorder):
    """The log's recorder: a save with `durable=False` commits without waiting for the disk."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if kwargs.get(DURABLE, True):
            return super().insert_events(stored_events, **kwargs)
        return _insert_relaxed(self, stored_events, **kwargs)


class SQLiteSnapshotRecorder(SQLiteAggregateRecorder):
    """The snapshots' recorder: a snapshot is a cache of its aggregate's events, in the same file, so
    its commit never waits for the disk (a power cut loses it only with the events after it)."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        return _insert_relaxed(self, stored_events, **kwargs)


class EngramSQLiteFactory(SQLiteFactory):
    aggregate_recorder_class = SQLiteSnapshotRecorder  # the application's only aggregate recorder
    application_recorder_class = SQLiteEventRecorder


class PostgresEventRecorder(PostgresApplicationRecorder):
    """The log's recorder: a save with `durable=False` commits with `synchronous_commit` off."""

    def _insert_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        # The library's hook for statements that run first in the insert's transaction.
        if not kwargs.get(DURABLE, True):
            curs.execute("SET LOCAL synchronous_commit TO OFF")
        super()._insert_events(curs, stored_events, **kwargs)


class EngramPostgresFactory(PostgresFactory):
    application_recorder_class = PostgresEventRecorder


SQLITE_FACTORY = f"{__name__}:{EngramSQLiteFactory.__qualname__}"
POSTGRES_FACTORY = f"{__name__}:{EngramPostgresFactory.__qualname__}"
