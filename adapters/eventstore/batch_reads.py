# ruff: noqa: S608
"""Reading the stored events of many aggregates in one query.

The library reads one aggregate per query (`select_events`), two with a snapshot. A patrol step that
changes a thousand nodes would pay that per node; these functions fetch the latest snapshots of many
aggregates, then every event after them, with one statement each, on the library's own connections
and tables. They only read, so they cannot break the library's write path. Table names come from the
recorders and ids are bound as parameters (hence the S608 exemptions).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard
from uuid import UUID

from eventsourcing.persistence import AggregateRecorder, StoredEvent
from eventsourcing.sqlite import SQLiteAggregateRecorder

from engram.adapters.eventstore.transcodings import uuid_from_hex

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresAggregateRecorder

MAX_IDS = 400
"""Aggregates per statement: SQLite binds two parameters per aggregate and allows 32,766 (999 before 3.32)."""


def on_postgres(recorder: AggregateRecorder) -> TypeGuard[PostgresAggregateRecorder]:
    # Without a PostgreSQL log the library's module (and psycopg, a fifth of the CLI's start-up) is
    # never imported, and then no recorder can be one of its classes.
    module = sys.modules.get("eventsourcing.postgres")
    return module is not None and isinstance(recorder, module.PostgresAggregateRecorder)


def supports(recorder: AggregateRecorder) -> bool:
    return isinstance(recorder, SQLiteAggregateRecorder) or on_postgres(recorder)


def latest_records(recorder: AggregateRecorder, ids: Sequence[UUID]) -> dict[UUID, StoredEvent]:
    """Each id's record with the highest version (for the snapshot store: its latest snapshot)."""
    out: dict[UUID, StoredEvent] = {}
    for start in range(0, len(ids), MAX_IDS):
        for record in _latest(recorder, ids[start : start + MAX_IDS]):
            out[_uuid(record.originator_id)] = record
    return out


def records_after(recorder: AggregateRecorder, after: Mapping[UUID, int]) -> dict[UUID, list[StoredEvent]]:
    """Each id's records with a version above `after[id]` (0: all), in version order."""
    out: dict[UUID, list[StoredEvent]] = defaultdict(list)
    items = list(after.items())
    for start in range(0, len(items), MAX_IDS):
        for record in _after(recorder, items[start : start + MAX_IDS]):
            out[_uuid(record.originator_id)].append(record)
    return out


def _uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def _latest(recorder: AggregateRecorder, ids: Sequence[UUID]) -> list[StoredEvent]:
    if on_postgres(recorder):
        table = pg_events_table(recorder)
        sql = (
            f"SELECT DISTINCT ON (originator_id) originator_id, originator_version, topic, state "
            f"FROM {table} WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version DESC"
        )
        return _pg_rows(recorder, sql, [list(ids)])
    assert isinstance(recorder, SQLiteAggregateRecorder)
    table = recorder.events_table_name
    marks = ", ".join("?" for _ in ids)
    sql = (
        f"SELECT t.originator_id, t.originator_version, t.topic, t.state FROM {table} t JOIN "
        f"(SELECT originator_id, MAX(originator_version) AS v FROM {table} "
        f"WHERE originator_id IN ({marks}) GROUP BY originator_id) m "
        "ON t.originator_id = m.originator_id AND t.originator_version = m.v"
    )
    return _sqlite_rows(recorder, sql, [i.hex for i in ids])


def _after(recorder: AggregateRecorder, items: Sequence[tuple[UUID, int]]) -> list[StoredEvent]:
    if on_postgres(recorder):
        table = pg_events_table(recorder)
        id_type = recorder.datastore.originator_id_type
        sql = (
            f"SELECT e.originator_id, e.originator_version, e.topic, e.state FROM {table} e "
            f"JOIN unnest(%s::{id_type}[], %s::bigint[]) AS q(id, after) "
            "ON e.originator_id = q.id AND e.originator_version > q.after "
            "ORDER BY e.originator_id, e.originator_version"
        )
        ids: list[Any] = [i if id_type == "uuid" else str(i) for i, _ in items]
        return _pg_rows(recorder, sql, [ids, [v for _, v in items]])
    assert isinstance(recorder, SQLiteAggregateRecorder)
    table = recorder.events_table_name
    values = ", ".join("(?, ?)" for _ in items)
    sql = (
        f"WITH q(id, after) AS (VALUES {values}) "
        f"SELECT t.originator_id, t.originator_version, t.topic, t.state FROM q "
        f"JOIN {table} t ON t.originator_id = q.id AND t.originator_version > q.after "
        "ORDER BY t.originator_id, t.originator_version"
    )
    return _sqlite_rows(recorder, sql, [p for i, v in items for p in (i.hex, v)])


def pg_events_table(recorder: PostgresAggregateRecorder) -> str:
    """The recorder's events table, quoted and qualified by its schema when it has one."""
    schema = recorder.datastore.schema
    return f'"{schema}"."{recorder.events_table_name}"' if schema else f'"{recorder.events_table_name}"'


def _pg_rows(recorder: PostgresAggregateRecorder, sql: str, params: list[Any]) -> list[StoredEvent]:
    with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(sql.encode(), params)
        return [
            StoredEvent(
                originator_id=row["originator_id"],
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=bytes(row["state"]),
            )
            for row in curs.fetchall()
        ]


def _sqlite_rows(recorder: SQLiteAggregateRecorder, sql: str, params: list[Any]) -> list[StoredEvent]:
    # The recorder's own conversion parses each id with `UUID(str)`: a few µs a record, a patrol
    # step reads thousands.
    uuids = recorder.datastore.originator_id_type == "uuid"
    with recorder.datastore.transaction(commit=False) as c:
        c.execute(sql, params)
        return [
            StoredEvent(
                originator_id=(
                    uuid_from_hex(row["originator_id"].replace("-", "")) if uuids else row["originator_id"]
                ),
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=row["state"],
            )
            for row in c.fetchall()
        ]
