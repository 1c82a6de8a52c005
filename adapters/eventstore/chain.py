# ruff: noqa: S608
"""The log's hash chain (ADR 0069): tamper evidence over the stored bytes.

Each stored event gets a row in a table of its own, `HASH_TABLE` (position, hash), written in the
transaction that inserts the event. The hash of the event at position p is

    h(p) = sha256(h(previous) || p || originator id (16 bytes) || version || topic || 0 || state)

where "previous" is the event before it in the log's order (positions are SQLite rowids, PostgreSQL
notification ids; gaps are allowed) and the first link chains from 32 zero bytes. It hashes what the
recorder stores (`state`, whatever it holds: encrypted, redacted), so erasure by key destruction
keeps the chain valid.

Sealing hashes every event after the last hashed one, so a log that predates the chain is hashed
from its first position by its first write after the upgrade (or by `engram verify`). On PostgreSQL
the library's insert holds `LOCK TABLE … IN EXCLUSIVE MODE` on the events table until it commits, so
concurrent writers seal one after another, in notification-id order. Table names come from the
recorders (hence the S608 exemption).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

HASH_TABLE = "engram_event_hashes"
GENESIS = bytes(32)
_PACK = struct.Struct(">q16sq").pack
_sha256 = hashlib.sha256
BATCH = 5000


def link(
    previous: bytes, position: int, originator_id: UUID | str, version: int, topic: str, state: bytes
) -> bytes:
    """The hash of one stored event chained to `previous`."""
    # SQLite returns ids as text: read as hex, not through `UUID(str)` (a quarter of verify's time).
    oid = (
        originator_id.bytes
        if isinstance(originator_id, UUID)
        else bytes.fromhex(originator_id.replace("-", ""))
    )
    return _sha256(b"".join((previous, _PACK(position, oid, version), topic.encode(), b"\0", state))).digest()


def _bytes(state: Any) -> bytes:
    # SQLite keeps whatever type a value was written with: a state rewritten as text hashes as its UTF-8.
    return state.encode() if isinstance(state, str) else bytes(state)


def sqlite_create_statement() -> str:
    return f"CREATE TABLE IF NOT EXISTS {HASH_TABLE} (position INTEGER PRIMARY KEY, hash BLOB NOT NULL)"


def postgres_create_statement(schema: str | None) -> str:
    table = _pg_name(schema, HASH_TABLE)
    return f"CREATE TABLE IF NOT EXISTS {table} (position bigint PRIMARY KEY, hash bytea NOT NULL)"


def _pg_name(schema: str | None, table: str) -> str:
    return f'"{schema}"."{table}"' if schema else f'"{table}"'


def _chained(previous: bytes, rows: list[tuple[Any, ...]]) -> list[tuple[int, bytes]]:
    out = []
    for position, oid, version, topic, state in rows:
        previous = link(previous, int(position), oid, int(version), topic, _bytes(state))
        out.append((int(position), previous))
    return out


def seal_sqlite(cursor: Any, events_table: str) -> int:
    """Hash every event after the last hashed one, in the caller's transaction. Returns how many."""
    cursor.execute(f"SELECT position, hash FROM {HASH_TABLE} ORDER BY position DESC LIMIT 1")
    last = cursor.fetchone()
    after, previous = (int(last[0]), bytes(last[1])) if last else (0, GENESIS)
    done = 0
    while True:
        cursor.execute(
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {events_table} "
            "WHERE rowid > ? ORDER BY rowid LIMIT ?",
            [after, BATCH],
        )
        rows = [tuple(r) for r in cursor.fetchall()]
        if not rows:
            return done
        hashes = _chained(previous, rows)
        cursor.executemany(f"INSERT INTO {HASH_TABLE} (position, hash) VALUES (?, ?)", hashes)
        after, previous = hashes[-1]
        done += len(hashes)
        if len(rows) < BATCH:
            return done


def seal_postgres(cursor: Any, schema: str | None, events_table: str, uuid_ids: bool = True) -> None:
    """`seal_sqlite` on PostgreSQL, computed by the server in one statement; the caller holds the
    events table's lock (the library's insert).

    The library's insert runs in pipeline mode: a statement whose result is read mid-transaction
    (the last hash, then the rows) costs a round trip per insert and, with large batches, hung the
    pipeline. The chain is computed by a recursive query instead, each step an index lookup of the
    next position, with PostgreSQL's `sha256` over the same bytes as `link` (`int8send` is the
    big-endian 8 bytes of `struct`'s `>q`, `uuid_send` the id's 16 bytes). Nothing is read back: the
    commit flushes it."""
    events = _pg_name(schema, events_table)
    hashes = _pg_name(schema, HASH_TABLE)
    oid = "e.originator_id" if uuid_ids else "e.originator_id::uuid"
    sql = (
        "WITH RECURSIVE chain(position, hash) AS ("
        f"  SELECT COALESCE(l.position, 0), COALESCE(l.hash, '\\x{GENESIS.hex()}'::bytea) FROM (SELECT 1) one"
        f"  LEFT JOIN (SELECT position, hash FROM {hashes} ORDER BY position DESC LIMIT 1) l ON true"
        "  UNION ALL"
        "  SELECT e.notification_id, sha256(c.hash || int8send(e.notification_id) || "
        f"uuid_send({oid}) || int8send(e.originator_version::bigint) || "
        "convert_to(e.topic, 'UTF8') || '\\x00'::bytea || e.state)"
        "  FROM chain c CROSS JOIN LATERAL ("
        f"    SELECT * FROM {events} WHERE notification_id > c.position ORDER BY notification_id LIMIT 1"
        "  ) e"
        f") INSERT INTO {hashes} (position, hash) SELECT position, hash FROM chain "
        f"WHERE position > COALESCE((SELECT MAX(position) FROM {hashes}), 0)"
    )
    with cursor.connection.cursor() as c:
        c.execute(sql.encode(), prepare=True)  # planning the recursive query costs more than running it


@dataclass(frozen=True)
class Verdict:
    """What `verify` found: `broken_at` is the first position where the chain fails (None: intact)."""

    checked: int
    head_position: int
    head_hash: str
    broken_at: int | None = None
    reason: str = ""
    unsealed: int = 0

    @property
    def ok(self) -> bool:
        return self.broken_at is None

    def as_dict(self, start: int) -> dict[str, Any]:
        """The verdict as `engram verify --json` and `GET /v1/admin/verify` give it (checked after `start`)."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "from": start,
            "head_position": self.head_position,
            "head_hash": self.head_hash,
            "broken_at": self.broken_at,
            "reason": self.reason or None,
            "unsealed": self.unsealed,
        }


Rows = Callable[[int, int], list[tuple[Any, ...]]]
"""(after, limit) -> rows (position, originator_id, version, topic, state, stored hash or None) of
every event and every hash row after `after`, in position order (a full outer join)."""


def walk(rows: Rows, start: int, previous: bytes, progress: Callable[[int], None] | None = None) -> Verdict:
    """Recompute the chain from the first position after `start`, `previous` being the stored hash at
    `start` (GENESIS from the beginning), and compare it with the stored hashes."""
    checked, after, head = 0, start, start
    for batch in _batches(rows, after):
        for position, oid, version, topic, state, stored in batch:
            if oid is None:
                return Verdict(checked, head, previous.hex(), position, "a hashed event is missing")
            if stored is None:
                # Events after the last hash were written before the chain existed (or outside Engram):
                # sealed by the next write; an unhashed event before a hashed one is a break.
                tail = [r for r in batch if r[0] >= position]
                if all(r[5] is None for r in tail) and _rest_unhashed(rows, batch[-1][0]):
                    return Verdict(checked, head, previous.hex(), unsealed=_count(rows, position - 1))
                return Verdict(checked, head, previous.hex(), position, "an event has no stored hash")
            expected = link(previous, position, oid, version, topic, _bytes(state))
            if expected != bytes(stored):
                return Verdict(
                    checked, head, previous.hex(), position, "the stored event or its hash was changed"
                )
            previous, head = expected, position
            checked += 1
        if progress is not None:
            progress(checked)
    return Verdict(checked, head, previous.hex())


def _batches(rows: Rows, after: int) -> Iterator[list[tuple[Any, ...]]]:
    while True:
        batch = rows(after, BATCH)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def _rest_unhashed(rows: Rows, after: int) -> bool:
    return all(r[5] is None for batch in _batches(rows, after) for r in batch)


def _count(rows: Rows, after: int) -> int:
    return sum(len(batch) for batch in _batches(rows, after))
