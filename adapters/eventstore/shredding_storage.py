# ruff: noqa: S608  (table names from the library's recorders, values as parameters)
"""The storage side of erasure (ADR 0073): count and find a being's sealed events by their clear
header, drop its snapshots, and scrub the SQLite files so deleted rows leave no readable bytes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

import structlog
from eventsourcing.sqlite import SQLiteAggregateRecorder

from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table
from engram.adapters.eventstore.shredding import MAGIC, ShreddingMapper, header_for

log = structlog.get_logger(__name__)
_HEADER = len(MAGIC) + 16
_RECEIPTS = "engram.Erasure.%"  # in clear by design, naming the being: not text to shred (ADR 0075)


class ShreddingStorage:
    """`ShreddableLog` over the application's recorders and the deployment's SQLite files."""

    def __init__(self, app: Any, data_dir: Path) -> None:
        self.app = app
        self.data_dir = data_dir

    def _count(self, recorder: Any, where_sqlite: str, where_pg: str, params: list[Any]) -> int:
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(f"SELECT count(*) FROM {recorder.events_table_name} WHERE {where_sqlite}", params)
                return int(c.fetchone()[0])
        if on_postgres(recorder):
            with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(
                    f"SELECT count(*) FROM {pg_events_table(recorder)} WHERE {where_pg}".encode(), params
                )
                row = curs.fetchone()
                return int(row["count"] if isinstance(row, dict) else row[0])  # type: ignore[index]
        return 0

    def sealed_events(self, key_id: UUID) -> int:
        prefix = header_for(key_id)
        return self._count(
            self.app.recorder,
            f"substr(state, 1, {_HEADER}) = ?",
            f"substr(state, 1, {_HEADER}) = %s",
            [prefix],
        )

    def clear_events(self, key_id: UUID) -> int:
        # The JSON transcoder writes ids as their 32 hex digits: an event in clear that names the
        # being holds them. A conservative count (an event naming the being elsewhere counts too).
        needle = key_id.hex.encode()
        return self._count(
            self.app.recorder,
            "substr(state, 1, 4) != ? AND instr(state, ?) > 0 AND topic NOT LIKE ?",
            "substr(state, 1, 4) != %s AND position(%s::bytea in state) > 0 AND topic NOT LIKE %s",
            [MAGIC, needle, _RECEIPTS],
        )

    def sealed_under(self, key_ids: set[UUID]) -> int:
        """How many stored events are sealed under any of `key_ids` (ADR 0075: an item's or a
        subject's keys): one scan reading the 16-byte key id of each sealed row's header."""
        wanted = {k.bytes for k in key_ids}
        if not wanted:
            return 0
        recorder = self.app.recorder
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT substr(state, 5, 16) FROM {recorder.events_table_name} WHERE substr(state, 1, 4) = ?",
                    [MAGIC],
                )
                return sum(1 for (key,) in c.fetchall() if bytes(key) in wanted)
        if on_postgres(recorder):
            with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(
                    f"SELECT substr(state, 5, 16) AS k FROM {pg_events_table(recorder)} "
                    "WHERE substr(state, 1, 4) = %s".encode(),
                    [MAGIC],
                )
                rows = curs.fetchall()
                return sum(1 for r in rows if bytes(r["k"] if isinstance(r, dict) else r[0]) in wanted)
        return 0

    def keys_of(self, originator_id: UUID) -> set[UUID | None]:
        """The keys an aggregate's stored events are sealed under (None: an event in clear)."""
        return {
            UUID(bytes=bytes(e.state[4:_HEADER])) if bytes(e.state[:4]) == MAGIC else None
            for e in self.app.recorder.select_events(originator_id)
        }

    def drop_sealed_snapshots(self, key_id: UUID) -> int:
        snapshots = self.app.snapshots
        recorder = snapshots.recorder if snapshots is not None else None
        prefix = header_for(key_id)
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=True) as c:
                c.execute(
                    f"DELETE FROM {recorder.events_table_name} WHERE substr(state, 1, {_HEADER}) = ?",
                    [prefix],
                )
                c.execute("SELECT changes()")
                return int(c.fetchone()[0])
        if recorder is not None and on_postgres(recorder):
            with recorder.datastore.transaction(commit=True) as curs:
                curs.execute(
                    f"DELETE FROM {pg_events_table(recorder)} WHERE substr(state, 1, {_HEADER}) = %s".encode(),
                    [prefix],
                )
                return int(curs.rowcount)
        return 0

    def forget_cipher(self, key_id: UUID) -> None:
        mapper = self.app.mapper
        if isinstance(mapper, ShreddingMapper):
            mapper.forget_cipher(key_id)

    def scrub(self) -> list[str]:
        """Deleted rows stay in SQLite's free pages and WAL until overwritten: checkpoint every
        SQLite view file of the data dir and VACUUM it. (PostgreSQL keeps dead tuples in its table
        files until VACUUM reuses them; `pg_dump` no longer shows them. See ADR 0073.)"""
        done = []
        for path in sorted(self.data_dir.rglob("*.sqlite3")):
            if path.name == "events.sqlite3":
                continue  # the log holds a being's text sealed only: nothing in clear to scrub there
            try:
                conn = sqlite3.connect(path, timeout=30, isolation_level=None)
                try:
                    conn.execute("PRAGMA secure_delete = ON")
                    conn.execute("VACUUM")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    conn.close()
                done.append(str(path))
            except sqlite3.Error as exc:  # a file held by another process: reported, not fatal
                log.warning("erasure: could not scrub", path=str(path), error=str(exc))
        return done
