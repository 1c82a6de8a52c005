"""The log's recorders on PostgreSQL (ADR 0018): imported only when the log is on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg import Cursor
from psycopg.rows import DictRow

from engram.adapters.eventstore.recorders import DURABLE


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
