# ruff: noqa: S608
"""`engram verify`: recompute the log's hash chain (ADR 0069) and compare it with the stored hashes.

Reads the library's events table and the chain's table with one outer join per batch: an event
without its hash, a hash without its event (an event removed) and a changed byte all show as the
first broken position. Table names come from the recorders (hence the S608 exemption).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.sqlite import SQLiteApplicationRecorder

from engram.adapters.eventstore import chain
from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table


def verify(
    app: Application[UUID], start: int = 0, progress: Callable[[int], None] | None = None
) -> chain.Verdict:
    """Check the chain after position `start` (0: from the first event), anchored at the stored hash
    of the last hashed position at or before `start`."""
    rows, anchor = log_rows(app)
    position, previous = anchor(start)
    return chain.walk(rows, position, previous, progress)


def seal(app: Application[UUID]) -> int:
    """Hash the events written before the chain existed (a log upgraded and not yet written to)."""
    recorder = app.recorder
    if isinstance(recorder, SQLiteApplicationRecorder):
        with recorder.datastore.transaction(commit=True) as c:
            return chain.seal_sqlite(c, recorder.events_table_name)
    if on_postgres(recorder):
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute(f"LOCK TABLE {pg_events_table(recorder)} IN EXCLUSIVE MODE".encode())
            before = _hashed(curs, recorder)
            chain.seal_postgres(
                curs,
                recorder.datastore.schema,
                recorder.events_table_name,
                recorder.datastore.originator_id_type == "uuid",
            )
            return _hashed(curs, recorder) - before
    raise TypeError(f"no hash chain on {type(recorder).__name__}")


def _hashed(curs: Any, recorder: Any) -> int:
    schema = recorder.datastore.schema
    table = f'"{schema}"."{chain.HASH_TABLE}"' if schema else f'"{chain.HASH_TABLE}"'
    curs.execute(f"SELECT count(*) AS n FROM {table}".encode())
    row = curs.fetchone()
    return int(row["n"] if isinstance(row, dict) else row[0])


def stored_hashes(app: Application[UUID], positions: list[int]) -> dict[int, str]:
    """The stored chain hash (hex) at each of `positions` that has one."""
    rows, _ = log_rows(app)
    out: dict[int, str] = {}
    for p in positions:
        found = rows(p - 1, 1)
        if found and found[0][0] == p and found[0][5] is not None:
            out[p] = bytes(found[0][5]).hex()
    return out


def log_rows(app: Application[UUID]) -> tuple[chain.Rows, Callable[[int], tuple[int, bytes]]]:
    recorder = app.recorder
    if isinstance(recorder, SQLiteApplicationRecorder):
        return _sqlite(recorder)
    if on_postgres(recorder):
        return _postgres(recorder)
    raise TypeError(f"no hash chain on {type(recorder).__name__}")


def _windowed(window: Callable[[int, int], list[tuple[Any, ...]]], top: Callable[[], int]) -> chain.Rows:
    """`chain.Rows` from a reader of position ranges: each query reads one range of `limit` positions
    through the primary keys (an ORDER BY … LIMIT over the outer join would sort everything after
    `after` on every batch), skipping empty ranges up to the highest position."""

    def rows(after: int, limit: int) -> list[tuple[Any, ...]]:
        highest = top()
        while after < highest:
            found = window(after, after + limit)
            if found:
                return found
            after += limit
        return []

    return rows


def _sqlite(recorder: SQLiteApplicationRecorder) -> tuple[chain.Rows, Callable[[int], tuple[int, bytes]]]:
    t, h = recorder.events_table_name, chain.HASH_TABLE
    sql = (
        f"SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, h.hash FROM {t} e "
        f"LEFT JOIN {h} h ON h.position = e.rowid WHERE e.rowid > ? AND e.rowid <= ? "
        f"UNION ALL SELECT h.position, NULL, NULL, NULL, NULL, h.hash FROM {h} h "
        f"WHERE h.position > ? AND h.position <= ? AND NOT EXISTS (SELECT 1 FROM {t} WHERE rowid = h.position) "
        "ORDER BY 1"
    )
    top_sql = f"SELECT MAX(m) FROM (SELECT MAX(rowid) AS m FROM {t} UNION ALL SELECT MAX(position) FROM {h})"

    def window(after: int, upto: int) -> list[tuple[Any, ...]]:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(sql, [after, upto, after, upto])
            return [tuple(r) for r in c.fetchall()]

    def top() -> int:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(top_sql)
            return int(c.fetchone()[0] or 0)

    rows = _windowed(window, top)

    def anchor(start: int) -> tuple[int, bytes]:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT position, hash FROM {h} WHERE position <= ? ORDER BY position DESC LIMIT 1", [start]
            )
            row = c.fetchone()
        return (int(row[0]), bytes(row[1])) if row else (0, chain.GENESIS)

    return rows, anchor


def _postgres(recorder: Any) -> tuple[chain.Rows, Callable[[int], tuple[int, bytes]]]:
    from psycopg.rows import tuple_row

    schema = recorder.datastore.schema
    t = pg_events_table(recorder)
    h = f'"{schema}"."{chain.HASH_TABLE}"' if schema else f'"{chain.HASH_TABLE}"'
    sql = (
        "SELECT COALESCE(e.notification_id, h.position), e.originator_id, e.originator_version, e.topic, "
        f"e.state, h.hash FROM (SELECT * FROM {t} WHERE notification_id > %s AND notification_id <= %s) e "
        f"FULL OUTER JOIN (SELECT * FROM {h} WHERE position > %s AND position <= %s) h "
        "ON h.position = e.notification_id ORDER BY 1"
    )
    top_sql = f"SELECT GREATEST((SELECT MAX(notification_id) FROM {t}), (SELECT MAX(position) FROM {h}))"

    def window(after: int, upto: int) -> list[tuple[Any, ...]]:
        with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(sql.encode(), [after, upto, after, upto])
            return list(curs.fetchall())

    def top() -> int:
        with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(top_sql.encode())
            row = curs.fetchone()
        return int(row[0] or 0) if row else 0

    rows = _windowed(window, top)

    def anchor(start: int) -> tuple[int, bytes]:
        with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(
                f"SELECT position, hash FROM {h} WHERE position <= %s ORDER BY position DESC LIMIT 1".encode(),
                [start],
            )
            row = curs.fetchone()
        return (int(row[0]), bytes(row[1])) if row else (0, chain.GENESIS)

    return rows, anchor
