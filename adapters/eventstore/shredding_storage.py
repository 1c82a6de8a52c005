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
from engram.adapters.eventstore.key_choice import choose_key
from engram.adapters.eventstore.shredding import (
    MAGIC_ITEM,
    MAGICS,
    ShreddingMapper,
    being_of,
    key_id_of,
    sealed,
)

log = structlog.get_logger(__name__)
_RECEIPTS = "engram.Erasure.%"  # in clear by design, naming the being: not text to shred (ADR 0075)
_SEALINGS = "engram.KeySealing.%"  # `keys seal`'s receipts (ADR 0095): in clear too


def _names(head: bytes, wanted: set[bytes]) -> bool:
    """Whether a sealed header names one of `wanted` as its key, or (`EGK2`) as its being."""
    return head[4:20] in wanted or (head[:4] == MAGIC_ITEM and head[20:36] in wanted)


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
        return self._count(
            self.app.recorder,
            "substr(state, 1, 4) IN (?, ?) AND substr(state, 5, 16) = ?",
            "substr(state, 1, 4) IN (%s, %s) AND substr(state, 5, 16) = %s",
            [*MAGICS, key_id.bytes],
        )

    def clear_events(self, key_id: UUID) -> int:
        # The JSON transcoder writes ids as their 32 hex digits: an event in clear that names the
        # being holds them. A conservative count (an event naming the being elsewhere counts too).
        needle = key_id.hex.encode()
        return self._count(
            self.app.recorder,
            "substr(state, 1, 4) NOT IN (?, ?) AND instr(state, ?) > 0 AND topic NOT LIKE ? AND topic NOT LIKE ?",
            "substr(state, 1, 4) NOT IN (%s, %s) AND position(%s::bytea in state) > 0 AND topic NOT LIKE %s "
            "AND topic NOT LIKE %s",
            [*MAGICS, needle, _RECEIPTS, _SEALINGS],
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
                    f"SELECT substr(state, 1, 36) FROM {recorder.events_table_name} "
                    "WHERE substr(state, 1, 4) IN (?, ?)",
                    [*MAGICS],
                )
                return sum(1 for (head,) in c.fetchall() if _names(bytes(head), wanted))
        if on_postgres(recorder):
            with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(
                    f"SELECT substr(state, 1, 36) AS k FROM {pg_events_table(recorder)} "
                    "WHERE substr(state, 1, 4) IN (%s, %s)".encode(),
                    [*MAGICS],
                )
                rows = curs.fetchall()
                return sum(1 for r in rows if _names(bytes(r["k"] if isinstance(r, dict) else r[0]), wanted))
        return 0

    def keys_of(self, originator_id: UUID) -> set[UUID | None]:
        """The keys an aggregate's stored events are sealed under (None: an event in clear)."""
        return {
            key_id_of(bytes(e.state)) if sealed(bytes(e.state)) else None
            for e in self.app.recorder.select_events(originator_id)
        }

    def drop_sealed_snapshots(self, key_id: UUID) -> int:
        snapshots = self.app.snapshots
        recorder = snapshots.recorder if snapshots is not None else None
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=True) as c:
                c.execute(
                    f"DELETE FROM {recorder.events_table_name} "
                    "WHERE substr(state, 1, 4) IN (?, ?) AND substr(state, 5, 16) = ?",
                    [*MAGICS, key_id.bytes],
                )
                c.execute("SELECT changes()")
                return int(c.fetchone()[0])
        if recorder is not None and on_postgres(recorder):
            with recorder.datastore.transaction(commit=True) as curs:
                curs.execute(
                    f"DELETE FROM {pg_events_table(recorder)} "
                    "WHERE substr(state, 1, 4) IN (%s, %s) AND substr(state, 5, 16) = %s".encode(),
                    [*MAGICS, key_id.bytes],
                )
                return int(curs.rowcount)
        return 0

    def recover_tags(self, being_id: UUID) -> int:
        """Write back the tags of the being's item keys that a power cut lost (ADR 0075): the tags
        were written without waiting for the disk, the slot and the event were. For each untagged
        slot an event names in its header, the event is opened and its key chosen again (the same
        pure choice that tagged it). Returns how many slots were tagged again."""
        keys = getattr(self.app, "keys", None)
        mapper = self.app.mapper
        if keys is None or not isinstance(mapper, ShreddingMapper):
            return 0
        untagged = {slot.bytes for slot in keys.untagged_slots(being_id)}
        if not untagged:
            return 0
        # Per slot, the event that tells the most: the item's own (an extraction shares its message's
        # key but not its subject), its first (a node's first event names its note).
        found: dict[UUID, tuple[UUID, int]] = {}
        for slot, key_id, oid, version in self.item_headers():
            if slot.bytes not in untagged:
                continue
            best = found.get(slot)
            rank = (oid != key_id, version)
            if best is None or rank < (best[0] != key_id, best[1]):
                found[slot] = (oid, version)
        recovered = 0
        for slot, (oid, version) in found.items():
            for e in self.app.recorder.select_events(oid, gt=version - 1, lte=version):
                state = bytes(e.state)
                opened = mapper.open_state(e.originator_id, e.originator_version, e.topic, state)
                owner = being_of(state)
                if opened is None or owner is None:
                    continue
                choice = choose_key(e.topic, oid, owner, mapper.transcoder.decode(opened))
                keys.tag_slot(slot, key_id_of(state), choice.subject, choice.item_id)
                recovered += 1
        if recovered:
            log.warning("key_tags_recovered", being=str(being_id), slots=recovered)
        return recovered

    def item_headers(self) -> list[tuple[UUID, UUID, UUID, int]]:
        """(slot, key id, originator id, version) of every event sealed under an item's key: one scan."""
        recorder = self.app.recorder
        rows: list[Any] = []
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT substr(state, 37, 16), substr(state, 5, 16), originator_id, originator_version "
                    f"FROM {recorder.events_table_name} WHERE substr(state, 1, 4) = ?",
                    [MAGIC_ITEM],
                )
                rows = [tuple(r) for r in c.fetchall()]
        elif on_postgres(recorder):
            with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(
                    f"SELECT substr(state, 37, 16) AS s, substr(state, 5, 16) AS k, originator_id AS o, "
                    "originator_version AS v "
                    f"FROM {pg_events_table(recorder)} WHERE substr(state, 1, 4) = %s".encode(),
                    [MAGIC_ITEM],
                )
                rows = [
                    (r["s"], r["k"], r["o"], r["v"]) if isinstance(r, dict) else tuple(r)
                    for r in curs.fetchall()
                ]
        return [
            (UUID(bytes=bytes(s)), UUID(bytes=bytes(k)), o if isinstance(o, UUID) else UUID(str(o)), int(v))
            for s, k, o, v in rows
        ]

    def forget_cipher(self, key_id: UUID) -> None:
        mapper = self.app.mapper
        if isinstance(mapper, ShreddingMapper):
            mapper.forget_cipher(key_id)

    def scrub(self) -> list[str]:
        """Deleted rows stay in SQLite's free pages and WAL until overwritten: checkpoint every
        SQLite view file of the data dir and VACUUM it. (PostgreSQL keeps dead tuples in its table
        files until VACUUM reuses them; `pg_dump` no longer shows them. See ADR 0073.)"""
        # The log holds a being's text sealed only: nothing in clear to scrub there.
        paths = [p for p in sorted(self.data_dir.rglob("*.sqlite3")) if p.name != "events.sqlite3"]
        return vacuum_files(paths, "erasure")


def vacuum_files(paths: list[Path], what: str, timeout: float = 30) -> list[str]:
    """VACUUM each SQLite file (every page written anew, so deleted rows leave no bytes) with
    `secure_delete`, and truncate its WAL. A file held by another process is reported, not fatal."""
    done = []
    for path in paths:
        try:
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
            try:
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute("VACUUM")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
            done.append(str(path))
        except sqlite3.Error as exc:
            log.warning(f"{what}: could not scrub", path=str(path), error=str(exc))
    return done
