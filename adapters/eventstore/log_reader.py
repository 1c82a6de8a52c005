# ruff: noqa: S608
"""The log as projections read it, with a bulk read for catching up and rebuilding.

`EventLogSource` is the `EventSource` port (projections/engine/source.py). The library reads
notifications and decodes them one by one; `decoded_events()` reads the same rows from the library's
own table and decodes them straight into domain events: no `Notification` object per row, ids
converted once, each topic resolved once per batch. In a rebuild that was about a quarter of the
cost of getting an event to a handler. It is the library's `Mapper.to_domain_event` unrolled, for the configuration this
application uses (JSON, no cipher, no compression); any other configuration, and any other
recorder, takes the library's path. Table names come from the recorders, values are bound
parameters (hence the S608 exemption).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import Notification
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.utils import resolve_topic

from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table
from engram.adapters.eventstore.shredding import erased, sealed
from engram.adapters.eventstore.transcodings import uuid_from_hex
from engram.projections.engine import event_key

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresAggregateRecorder

_new = object.__new__
_set = object.__setattr__


class EventLogSource:
    """`EventSource` over the application's log, plus `decoded_events()`."""

    def __init__(self, app: Application[UUID]) -> None:
        self.app = app

    def head(self) -> int:
        return self.app.recorder.max_notification_id() or 0

    @property
    def reuses_positions(self) -> bool:
        """Whether a power cut may give a position to a second event (ADR 0018): on SQLite, a commit
        that skipped the fsync may be lost and its rowid taken again. PostgreSQL's sequence never
        hands a value out twice, and its write-ahead log is one stream with the views'."""
        return isinstance(self.app.recorder, SQLiteApplicationRecorder)

    def key_at(self, position: int) -> str | None:
        """The `engine.event_key` of the event at `position`, None where there is none."""
        recorder = self.app.recorder
        if isinstance(recorder, SQLiteApplicationRecorder):
            sql = (
                f"SELECT originator_id, originator_version FROM {recorder.events_table_name} WHERE rowid = ?"
            )
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(sql, [position])
                row = c.fetchone()
        else:
            found = self.notifications(position, 1, stop=position)
            row = (found[0].originator_id, found[0].originator_version) if found else None
        return None if row is None else event_key(row[0], int(row[1]))

    def positions(self, aggregate_id: UUID) -> dict[int, int]:
        """Each version of one aggregate with its log position (`engram why`, ADR 0068): one read on
        the events table's primary key, whatever the size of the log."""
        recorder = self.app.recorder
        if isinstance(recorder, SQLiteApplicationRecorder):
            sql = (
                f"SELECT originator_version, rowid FROM {recorder.events_table_name} WHERE originator_id = ?"
            )
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(sql, [aggregate_id.hex])  # stored as batch_reads.py reads them
                return {int(v): int(p) for v, p in c.fetchall()}
        if on_postgres(recorder):
            from psycopg.rows import tuple_row

            table = pg_events_table(recorder)
            sql = f"SELECT originator_version, notification_id FROM {table} WHERE originator_id = %s"
            key: Any = aggregate_id if recorder.datastore.originator_id_type == "uuid" else str(aggregate_id)
            with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
                curs.execute(sql.encode(), [key])
                return {int(v): int(p) for v, p in curs.fetchall()}
        return {}

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]:
        return self.app.recorder.select_notifications(start, limit, stop=stop, topics=topics)

    def decode(self, notification: Notification) -> Any:
        return self.app.mapper.to_domain_event(notification)

    def decoded_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, Any]]:
        """(position, domain event) of up to `limit` notifications from `start` to `stop` (inclusive)
        whose topic is in `topics` (all when empty), in log order."""
        decoded = self._decoded(start, limit, topics, stop, tagged=False)
        if decoded is None:
            return self._through_library(start, limit, topics, stop)
        return decoded

    def tagged_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, str, Any]]:
        """`decoded_events`, each with the topic it is stored under: (position, topic, event)."""
        decoded = self._decoded(start, limit, topics, stop, tagged=True)
        if decoded is None:
            return [(n.id, n.topic, self.decode(n)) for n in self.notifications(start, limit, topics, stop)]
        return decoded

    def _decoded(
        self, start: int, limit: int, topics: Sequence[str], stop: int | None, *, tagged: bool
    ) -> list[Any] | None:
        """The events as `decoded_events` (or, `tagged`, `tagged_events`) returns them; None where
        only the library's path applies."""
        recorder, mapper = self.app.recorder, self.app.mapper
        if mapper.cipher is not None or mapper.compressor is not None:
            return None
        if isinstance(recorder, SQLiteApplicationRecorder):
            rows = _sqlite_rows(recorder, start, limit, topics, stop)
            convert_id = _sqlite_id if recorder.datastore.originator_id_type == "uuid" else str
        elif on_postgres(recorder):
            rows = _postgres_rows(recorder, start, limit, topics, stop)
            convert_id = _same
        else:
            return None
        decode = mapper.transcoder.decode
        classes: dict[str, Any] = {}
        out: list[Any] = []
        for position, originator_id, version, topic, state in rows:
            cls = classes.get(topic)
            if cls is None:
                cls = classes[topic] = resolve_topic(topic)
            if sealed(state):  # sealed with its being's or an item's key (ADR 0073, 0075)
                opened = mapper.open_state(originator_id, version, topic, state)  # type: ignore[attr-defined]
                if opened is None:  # its key was destroyed: the event reads as erased
                    gone = erased(originator_id, version, topic, state)
                    out.append((position, topic, gone) if tagged else (position, gone))
                    continue
                state = opened
            event_state = decode(state)
            event_state["originator_id"] = convert_id(originator_id)
            event_state["originator_version"] = version
            class_version = getattr(cls, "class_version", 1)
            from_version = event_state.pop("class_version", 1)
            while from_version < class_version:
                getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(event_state)
                from_version += 1
            event = _new(cls)
            _set(event, "__dict__", event_state)
            out.append((position, topic, event) if tagged else (position, event))
        return out

    def _through_library(
        self, start: int, limit: int, topics: Sequence[str], stop: int | None
    ) -> list[tuple[int, Any]]:
        return [(n.id, self.decode(n)) for n in self.notifications(start, limit, topics, stop)]


def _same(value: Any) -> Any:
    return value


def _sqlite_id(value: str) -> UUID:
    return uuid_from_hex(value.replace("-", ""))


def _sqlite_rows(
    recorder: SQLiteApplicationRecorder, start: int, limit: int, topics: Sequence[str], stop: int | None
) -> list[tuple[Any, ...]]:
    sql = (
        "SELECT rowid, originator_id, originator_version, topic, state "
        f"FROM {recorder.events_table_name} WHERE rowid >= ?"
    )
    params: list[Any] = [start]
    if stop is not None:
        sql += " AND rowid <= ?"
        params.append(stop)
    if topics:
        sql += f" AND topic IN ({', '.join('?' for _ in topics)})"
        params += topics
    sql += " ORDER BY rowid LIMIT ?"
    params.append(limit)
    with recorder.datastore.transaction(commit=False) as c:
        c.execute(sql, params)
        return list(c.fetchall())


def _postgres_rows(
    recorder: PostgresAggregateRecorder, start: int, limit: int, topics: Sequence[str], stop: int | None
) -> list[tuple[Any, ...]]:
    from psycopg.rows import tuple_row

    table = pg_events_table(recorder)
    sql = (
        "SELECT notification_id, originator_id, originator_version, topic, state "
        f"FROM {table} WHERE notification_id >= %s"
    )
    params: list[Any] = [start]
    if stop is not None:
        sql += " AND notification_id <= %s"
        params.append(stop)
    if topics:
        sql += " AND topic = ANY(%s)"
        params.append(list(topics))
    sql += " ORDER BY notification_id LIMIT %s"
    params.append(limit)
    with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
        curs.execute(sql.encode(), params, prepare=True)
        return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in curs.fetchall()]
