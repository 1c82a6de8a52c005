"""The log's recorders on PostgreSQL (ADR 0018): imported only when the log is on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL

from engram.adapters.eventstore import chain
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

    def create_table(self) -> None:
        super().create_table()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL(chain.postgres_create_statement(self.datastore.schema)))

    def _fetch_ids_after_insert_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        # Still in the insert's transaction, the events table locked (ADR 0069).
        chain.seal_postgres(
            curs, self.datastore.schema, self.events_table_name, self.datastore.originator_id_type == "uuid"
        )
        return ids


class EngramPostgresFactory(PostgresFactory):
    application_recorder_class = PostgresEventRecorder
