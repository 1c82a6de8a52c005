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

On SQLite the log's file is checkpointed by a thread of its own, as the views' files are (ADR 0016): no
commit, durable or not, copies the write-ahead log back into the database below
`INLINE_CHECKPOINT_PAGES`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent
from eventsourcing.sqlite import (
    SQLiteAggregateRecorder,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteDatastore,
    SQLiteFactory,
)

from engram.adapters.eventstore import chain
from engram.adapters.sqlite_checkpoints import INLINE_CHECKPOINT_PAGES, Checkpointer

DURABLE = "durable"
"""The keyword a save passes down to the recorder (`EventLog.save(..., durable=False)`)."""


def _insert(
    recorder: SQLiteAggregateRecorder, stored_events: Sequence[StoredEvent], *, durable: bool, **kwargs: Any
) -> Sequence[int] | None:
    """`insert_events` in one transaction, as the library runs it, then a signal to the file's
    checkpointer (ADR 0016: a commit never copies the log back into the database itself, below
    `INLINE_CHECKPOINT_PAGES`). `durable=False`: committed without an fsync; SQLite refuses to change
    the setting inside a transaction, so it is set on the connection before `BEGIN` and put back after."""
    datastore: SQLiteDatastore = recorder.datastore
    with datastore.get_connection(commit=True) as conn:
        if conn not in _TUNED:
            with conn.cursor() as cursor:
                cursor.execute(f"PRAGMA wal_autocheckpoint={INLINE_CHECKPOINT_PAGES}")
            _TUNED.add(conn)
        if not durable:
            with conn.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")
        try:
            with conn.transaction(commit=True) as c:
                ids = recorder._insert_events(c, stored_events, **kwargs)
                if isinstance(recorder, SQLiteEventRecorder):
                    chain.seal_sqlite(c, recorder.events_table_name)  # ADR 0069: in the same transaction
        finally:
            if not durable:
                with conn.cursor() as cursor:
                    cursor.execute("PRAGMA synchronous=FULL")
    checkpointer: Checkpointer | None = getattr(recorder, "checkpointer", None)
    if checkpointer is not None:
        checkpointer.committed()
    return ids


_TUNED: weakref.WeakSet[SQLiteConnection] = weakref.WeakSet()
"""The library's pooled connections that have the checkpoint setting already."""


class SQLiteEventRecorder(SQLiteApplicationRecorder):
    """The log's recorder: a save with `durable=False` commits without waiting for the disk."""

    checkpointer: Checkpointer | None = None

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), chain.sqlite_create_statement()]

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        durable = bool(kwargs.pop(DURABLE, True))
        return _insert(self, stored_events, durable=durable, **kwargs)


class SQLiteSnapshotRecorder(SQLiteAggregateRecorder):
    """The snapshots' recorder: a snapshot is a cache of its aggregate's events, in the same file, so
    its commit never waits for the disk (a power cut loses it only with the events after it)."""

    checkpointer: Checkpointer | None = None

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        kwargs.pop(DURABLE, None)
        return _insert(self, stored_events, durable=False, **kwargs)


class EngramSQLiteFactory(SQLiteFactory):
    """The library's factory, with our recorders sharing one checkpointer for the log's file."""

    aggregate_recorder_class = SQLiteSnapshotRecorder  # the application's only aggregate recorder
    application_recorder_class = SQLiteEventRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        name = self.datastore.pool.db_name
        in_memory = name == ":memory:" or "mode=memory" in name
        self.checkpointer = None if in_memory else Checkpointer(Path(name))

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        recorder = super().aggregate_recorder(purpose)
        if isinstance(recorder, SQLiteSnapshotRecorder):
            recorder.checkpointer = self.checkpointer
        return recorder

    def application_recorder(self) -> ApplicationRecorder:
        recorder = super().application_recorder()
        if isinstance(recorder, SQLiteEventRecorder):
            recorder.checkpointer = self.checkpointer
        return recorder

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        super().close()


SQLITE_FACTORY = f"{__name__}:{EngramSQLiteFactory.__qualname__}"
# PostgreSQL's recorders live in their own module: the library imports a factory by this name when
# the log is opened, so a process on SQLite never loads psycopg (a fifth of the CLI's start-up).
POSTGRES_FACTORY = "engram.adapters.eventstore.postgres_recorders:EngramPostgresFactory"


def __getattr__(name: str) -> Any:
    if name in ("PostgresEventRecorder", "EngramPostgresFactory"):
        from engram.adapters.eventstore import postgres_recorders

        return getattr(postgres_recorders, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
