"""The keys of items and subjects (ADR 0075), beside `keys.json`: one SQLite file, 0600.

A being has one key; its notes, messages, facts, nodes and conversations have one each, so there
are as many as items. `keys.json` is rewritten whole on each change, right for a few keys per being
but not for one per note; here a key is one row.

**A pool reserved in blocks** (ADR 0075): keys are created ahead, per being, a block at a time in one
transaction flushed to disk (`synchronous=FULL`), each under a unique *slot* id, reserved by this
process (in memory only: no other process ever sees them as free). Handing one to an item is a pop
from memory plus an UPDATE writing its tags (key id = the item's, subject, item) without waiting for
the disk (`synchronous=NORMAL`, WAL: safe against a process crash, not a power cut). The sealed
header names the slot (`shredding.py`, `EGK2`), so a key is found by it even when its tags were lost;
forgetting recovers lost tags from the events themselves (`ShreddingStorage.recover_tags`). A key
is never lost while an event sealed under it survives: its row was on disk before the event was
written. A slot is handed out once: only the process that reserved it hands it out, and a process
that dies leaves its unused slots unused (a few KB, deleted with the being).

**A batch** (a save taking 256 keys or more) does not use the pool: its keys are written already
tagged, one row each, by the background thread while the saving thread encrypts the batch, and the
encryption of its last event waits until they are on disk (`settle`). One flush per batch costs less
than a tag update per key.

A destroyed key's rows are deleted (the file is VACUUMed with `secure_delete` by the erasure's
scrub) and a tombstone goes to `keys.json`, which every process already watches. Keys read are
kept in memory.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import struct
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID, SafeUUID

import structlog

log = structlog.get_logger(__name__)
_KEY_BYTES = 32  # AES-256-GCM
_FIRST_BLOCK = 16
_MAX_BLOCK = 4096
"""A being's first block is small (a being with three notes does not hold thousands of keys); each
next block doubles (and covers at least twice the save that asked for it), up to 4096: a steady
ingest, one note at a time or in batches of 500, pays one flush per thousands of new items. A
process that closes deletes its unused reservations; one killed leaves them (never used)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS key_slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    slot TEXT NOT NULL UNIQUE,  -- named by the sealed header: durable before any event uses it
    being_id TEXT NOT NULL,     -- durable too: forgetting the being deletes every one of its rows
    key_id TEXT,                -- the item's or conversation's id; NULL while reserved (or tag lost)
    subject TEXT,
    item_id TEXT,
    key BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS key_slots_being ON key_slots (being_id);
DROP INDEX IF EXISTS key_slots_key;
"""
# No index on key id, subject or item: each would be one more random write per new key (the key ids
# are the items' random ids: at 100k keys the key id index cost 20 µs a key). A process finds an
# item's slot from the header of the item's first event in the log (`shredding.first_slot`); only
# forgetting asks by key id, subject or item, in one pass over the being's rows.
_TAGS_AT_ONCE = 512
_DIRECT_AT = 256
"""A save taking this many keys or more (a batch) writes them tagged, with one flush to disk (a few
ms, overlapped with the batch's encryption): less than that many tag updates on top of the pool's
rows (~8 µs of CPU each, on the two cores the saving thread needs too). Smaller saves (one note per
command) take their keys from the pool: no flush at all."""
_OPEN_WAIT_S = 30.0  # as the connections' busy timeout
_TAGS_DELAY_S = 0.05
"""Queued tags are written when 512 wait or 50 ms after the first (lost to a crash meanwhile, they are
recovered from the log when forgetting)."""
Tags = tuple[UUID, UUID, str | None, UUID | None]
"""(key id, being, subject, item) of an item's or a subject's key."""


class OwnedKeys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        # Keyed by the UUIDs' `int` (hashed in C; `UUID.__hash__` is Python: ~0.3 µs a call, several
        # calls a key in a batch of 500, profiled).
        self._by_slot: dict[int, bytes] = {}
        self._by_key: dict[int, tuple[UUID, bytes]] = {}  # key id → (slot, key) to write with
        self._free: dict[UUID, list[tuple[UUID, bytes]]] = {}  # being → slots reserved, unused
        self._block: dict[UUID, int] = {}
        # The tags and the next blocks are written by a thread of their own (its own connection):
        # a save only takes keys from memory. Nothing waits for it but forgetting and closing.
        self._wake = threading.Condition()
        self._pending: list[tuple[str, str | None, str | None, str]] = []  # key id, subject, item, slot
        self._refill: dict[UUID, int] = {}
        self._batches: list[_Batch] = []  # a batch's tagged keys, written (and flushed) off its thread
        self._mine = threading.local()  # the batches this thread's save must see on disk (`settle`)
        self._busy = False
        self._flush_now = False
        self._closing = False  # `close` asks the background thread to end once idle
        self._writer: threading.Thread | None = None
        self._bg: sqlite3.Connection | None = None  # tags: not flushed (see above)
        self._bg_durable: sqlite3.Connection | None = None  # batches and blocks: flushed (FULL)

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _connect(self, *, durable: bool = False) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        _to_wal(conn)
        conn.execute("PRAGMA secure_delete=ON")  # a destroyed key's bytes are zeroed in the file
        # NORMAL: tags (reservations on this connection ask for FULL themselves); FULL: the background
        # thread's connection for blocks and batches, each one statement flushed as it commits.
        conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        return conn

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _write(self, sql: str, rows: Sequence[Sequence[object]], *, durable: bool) -> None:
        _run(self._db(), sql, rows, durable)

    def _background(self) -> None:
        """Write queued tags and reserve the next blocks, off the saving thread."""
        while True:
            with self._wake:
                while True:
                    if (
                        self._batches
                        or self._refill
                        or self._flush_now
                        or len(self._pending) >= _TAGS_AT_ONCE
                    ):
                        break
                    if self._pending:
                        # Tags wait a moment and go together: waking this thread for each note would
                        # make the saving thread wait for the interpreter's lock at each note.
                        if not self._wake.wait(timeout=_TAGS_DELAY_S):
                            break
                        continue
                    self._busy = False
                    self._wake.notify_all()
                    if self._closing:  # idle and asked to end: its connections go with it
                        self._close_background_connections()
                        return
                    self._wake.wait()
                self._busy = True
                self._flush_now = False
                tags, self._pending = self._pending, []
                refill, self._refill = self._refill, {}
                batches, self._batches = self._batches, []
            for batch in batches:  # first: a save waits for them
                batch.write(self)
            try:
                if tags:
                    if self._bg is None:
                        self._bg = self._connect()
                    self._bg.execute(_TAG, [json.dumps(tags)])  # one statement: its own transaction
                for being, size in refill.items():
                    block = self._new_keys(size)
                    rows = [(slot, None, None, None, key) for slot, key in block]
                    _insert(self._durable_bg(), being, rows, alone=True)
                    with self._lock:  # on disk now: usable
                        self._free.setdefault(being, [])[:0] = block
            except Exception as exc:  # a full disk: the tags are recovered from the log when forgetting
                log.warning("owned_keys_background_failed", error=repr(exc))

    def _durable_bg(self) -> sqlite3.Connection:
        """The background thread's connection for rows that must be on disk (`synchronous=FULL`)."""
        if self._bg_durable is None:
            self._bg_durable = self._connect(durable=True)
        return self._bg_durable

    def _enqueue(self, tags: list[tuple[str, str | None, str | None, str]], refill: dict[UUID, int]) -> None:
        with self._wake:
            self._pending.extend(tags)
            for being, size in refill.items():
                self._refill[being] = max(size, self._refill.get(being, 0))
            self._start_writer()
            if refill or len(self._pending) >= _TAGS_AT_ONCE or len(self._pending) == len(tags):
                self._wake.notify_all()  # a block to reserve, many tags, or the first tags of a quiet spell

    def _start_writer(self) -> None:
        """Start the background thread if none runs (the caller holds `_wake`)."""
        if self._writer is None:
            self._closing = False
            self._writer = threading.Thread(target=self._background, name="owned-keys", daemon=True)
            self._writer.start()

    def flush(self) -> None:
        """Wait until the queued tags and blocks are written (before anything reads the tags)."""
        with self._wake:
            while self._pending or self._refill or self._batches or self._busy:
                self._flush_now = True
                self._wake.notify_all()
                self._wake.wait(timeout=1)

    @staticmethod
    def _new_keys(count: int) -> list[tuple[UUID, bytes]]:
        """(slot, key) pairs: keys from one read of the system's randomness; slots that grow with time
        (milliseconds, rank in the block, 8 random bytes), so that each new row lands at the end of
        the slot index: random slots scattered each save's rows over the whole index, a page written
        per row (at 100k keys, 40 µs a key instead of 20 µs; see docs/audit.md)."""
        material = secrets.token_bytes((8 + _KEY_BYTES) * count)
        now = (time.time_ns() // 1_000_000) << 80
        randoms = struct.unpack(f">{count}Q", material[: count * 8])
        keys = count * 8
        # The UUIDs are built as `UUID.__init__` builds them (its two slots set), without its checks
        # of arguments it is not given: 0.25 µs a slot instead of 1 (`int` is 128 bits by
        # construction: 48 of milliseconds, 16 of rank, 64 random).
        make, put, unknown = object.__new__, object.__setattr__, SafeUUID.unknown
        out: list[tuple[UUID, bytes]] = []
        for i in range(count):
            slot = make(UUID)
            put(slot, "int", now | (i & 0xFFFF) << 64 | randoms[i])
            put(slot, "is_safe", unknown)
            out.append((slot, material[keys + i * _KEY_BYTES : keys + (i + 1) * _KEY_BYTES]))
        return out

    def _reserve(self, being_id: UUID) -> None:
        """Create a block of keys for the being, flushed to disk before any is used."""
        size = self._block.get(being_id, _FIRST_BLOCK)
        self._block[being_id] = min(_MAX_BLOCK, size * 2)
        block = self._new_keys(size)
        _insert(self._db(), being_id, [(slot, None, None, None, key) for slot, key in block])
        self._free.setdefault(being_id, []).extend(reversed(block))

    def _known(self, key_id: UUID, *, new: bool = False) -> tuple[UUID, bytes] | None:
        found = self._by_key.get(key_id.int)
        if found is None and not new and self.path.exists():
            # Another process may hold this item's key (a node written elsewhere, a conversation).
            row = (
                self._db()
                .execute("SELECT slot, key FROM key_slots WHERE key_id = ? ORDER BY id LIMIT 1", [key_id.hex])
                .fetchone()
            )
            if row is not None:
                found = self._by_key[key_id.int] = (UUID(hex=row[0]), bytes(row[1]))
        return found

    def slot_for_writing(
        self, key_id: UUID, being_id: UUID, subject: str | None, item_id: UUID | None
    ) -> tuple[UUID, bytes]:
        """The slot and key to seal the key id's events with, taken from the pool on first use."""
        with self._lock:
            found = self._known(key_id)
            if found is None:
                self._assign([(key_id, being_id, subject, item_id)])
                found = self._by_key[key_id.int]
            return found

    def create_many(self, wanted: Sequence[Tags], new: Collection[UUID] = ()) -> list[tuple[UUID, bytes]]:
        """Take the keys a whole save needs (each key id once, with the tags of its first event: a
        node's first names its note): at most one flush (a new block) for a batch. `new`: key ids of
        aggregates this save creates, which no process can have a key for yet. Returns each key's
        (slot, key), in the order asked."""
        with self._lock:
            by_key = self._by_key
            created = {k.int for k in new}  # ints: hashed in C (see `_by_key`)
            fresh = [w for w in wanted if self._known(w[0], new=w[0].int in created) is None]
            if fresh:
                self._assign(fresh)
            return [by_key[w[0].int] for w in wanted]

    def _assign(self, wanted: Sequence[Tags]) -> None:
        by_being: dict[UUID, list[Tags]] = {}
        first = wanted[0][1] if wanted else None
        if all(w[1] is first for w in wanted):  # one being (the usual save): no hash per key
            by_being = {first: list(wanted)} if first is not None else {}
        else:
            for w in wanted:
                by_being.setdefault(w[1], []).append(w)
        tagged: dict[UUID, list[tuple[UUID, UUID, str | None, UUID | None, bytes]]] = {}
        tags: list[tuple[str, str | None, str | None, str]] = []
        refill: dict[UUID, int] = {}
        by_key, by_slot = self._by_key, self._by_slot
        for being, items in by_being.items():
            free = self._free.setdefault(being, [])
            direct = len(items) >= _DIRECT_AT
            if not direct and len(items) > len(free) and len(items) <= self._block.get(being, _FIRST_BLOCK):
                self._reserve(being)  # one flush for the next thousands of single items
            if direct or len(items) > len(free):
                # A batch (or a save larger than a block): its keys are written already tagged, in one
                # flush (one row per key; from the pool each would cost a row and then a tag update).
                rows = tagged.setdefault(being, [])
                for (key_id, _, subject, item), (slot, key) in zip(
                    items, self._new_keys(len(items)), strict=True
                ):
                    by_key[key_id.int] = (slot, key)
                    by_slot[slot.int] = key
                    rows.append((slot, key_id, subject, item, key))
                if direct:
                    continue
            else:
                for key_id, _, subject, item in items:
                    slot, key = free.pop()
                    by_key[key_id.int] = (slot, key)
                    by_slot[slot.int] = key
                    tags.append((key_id.hex, subject, item.hex if item else None, slot.hex))
            # The next saves of this size find their keys ready: the block grows with the saves and
            # is written ahead by the background thread.
            size = self._block.get(being, _FIRST_BLOCK)
            if len(free) < max(size // 4, 2 * len(items)) and being not in self._refill:
                grown = min(_MAX_BLOCK, max(size, 4 * len(items)))
                self._block[being] = min(_MAX_BLOCK, grown * 2)
                refill[being] = grown
        for being, rows in tagged.items():
            if len(rows) >= _DIRECT_AT:
                self._write_soon(being, rows)
            else:
                try:
                    _insert(self._db(), being, rows)
                except BaseException:
                    self._unknow(rows)
                    raise
        if tags or refill:
            # The tags need not reach the disk before the event: the header names the slot (see above).
            self._enqueue(tags, refill)

    def _unknow(self, rows: Sequence[tuple[UUID, UUID, str | None, UUID | None, bytes]]) -> None:
        """Forget keys whose rows could not be written: nothing may be sealed under them."""
        for slot, key_id, _, _, _ in rows:
            self._by_slot.pop(slot.int, None)
            if self._by_key.get(key_id.int, (None,))[0] == slot:
                del self._by_key[key_id.int]

    def _write_soon(
        self, being: UUID, rows: Sequence[tuple[UUID, UUID, str | None, UUID | None, bytes]]
    ) -> None:
        """A batch's keys, written and flushed by the background thread while the saving thread
        encrypts the batch; the save waits for them (`settle`) before its events are written."""
        batch = _Batch(being, rows)
        pending = getattr(self._mine, "batches", None)
        if pending is None:
            pending = self._mine.batches = []
        pending.append(batch)
        with self._wake:
            self._batches.append(batch)
            self._start_writer()
            self._wake.notify_all()

    def settle(self) -> None:
        """Wait until the keys this thread's save took are on disk: before its events are written (a
        key is never lost while an event sealed under it survives). Raises if they could not be."""
        pending: list[_Batch] | None = getattr(self._mine, "batches", None)
        if not pending:
            return
        self._mine.batches = []
        failed = None
        for batch in pending:
            batch.done.wait()
            failed = failed or batch.error
        if failed is not None:
            raise failed

    def key_of_slot(self, slot: UUID) -> bytes | None:
        key = self._by_slot.get(slot.int)
        if key is None and self.path.exists():
            with self._lock:
                row = self._db().execute("SELECT key FROM key_slots WHERE slot = ?", [slot.hex]).fetchone()
                if row is not None:
                    key = self._by_slot[slot.int] = bytes(row[0])
        return key

    def get(self, key_id: UUID) -> bytes | None:
        with self._lock:
            found = self._known(key_id)
        return found[1] if found else None

    def untagged(self, being_id: UUID) -> list[UUID]:
        """The being's slots with no key id: reserved and unused, or used with tags a power cut lost."""
        self.flush()
        if not self.path.exists():
            return []
        with self._lock:
            rows = self._db().execute(
                "SELECT slot FROM key_slots WHERE being_id = ? AND key_id IS NULL", [being_id.hex]
            )
            return [UUID(hex=r[0]) for r in rows]

    def tag(self, slot: UUID, key_id: UUID, subject: str | None, item_id: UUID | None) -> None:
        """Write back the tags of a used slot (recovered from the event it sealed)."""
        self.flush()
        with self._lock:
            self._write(
                "UPDATE key_slots SET key_id = ?, subject = ?, item_id = ? WHERE slot = ? AND key_id IS NULL",
                [(key_id.hex, subject, item_id.hex if item_id else None, slot.hex)],
                durable=True,
            )

    def ids_of(self, being_id: UUID, subject: str | None = None, item_id: UUID | None = None) -> list[UUID]:
        self.flush()
        if not self.path.exists():
            return []
        sql = "SELECT DISTINCT key_id FROM key_slots WHERE being_id = ? AND key_id IS NOT NULL"
        params: list[str] = [being_id.hex]
        if subject is not None:
            sql += " AND subject = ?"
            params.append(subject)
        if item_id is not None:
            sql += " AND (item_id = ? OR key_id = ?)"
            params += [item_id.hex, item_id.hex]
        with self._lock:
            return [UUID(hex=r[0]) for r in self._db().execute(sql, params)]

    def _forget_cached(self, slots: Iterable[UUID], key_ids: Iterable[UUID]) -> None:
        for slot in slots:
            self._by_slot.pop(slot.int, None)
        for key_id in key_ids:
            self._by_key.pop(key_id.int, None)

    def delete(self, key_ids: Iterable[UUID]) -> int:
        """Delete every slot of these key ids (a key id may have several: two processes, a lost tag)."""
        self.flush()
        names = [k.hex for k in key_ids]
        if not names or not self.path.exists():
            return 0
        with self._lock:
            db = self._db()
            wanted = json.dumps(names)
            rows = db.execute(
                "SELECT slot FROM key_slots WHERE key_id IN (SELECT value FROM json_each(?))", [wanted]
            ).fetchall()
            slots = [UUID(hex=r[0]) for r in rows]
            self._forget_cached(slots, [UUID(hex=n) for n in names])
            _run_one(
                db,
                "DELETE FROM key_slots WHERE key_id IN (SELECT value FROM json_each(?))",
                [wanted],
                durable=True,
            )
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return len(slots)

    def delete_being(self, being_id: UUID) -> int:
        """Delete every row of the being, reserved or used, tagged or not (`forget being`)."""
        self.flush()
        if not self.path.exists():
            return 0
        with self._lock:
            db = self._db()
            rows = db.execute(
                "SELECT slot, key_id FROM key_slots WHERE being_id = ?", [being_id.hex]
            ).fetchall()
            self._forget_cached([UUID(hex=r[0]) for r in rows], [UUID(hex=r[1]) for r in rows if r[1]])
            self._free.pop(being_id, None)
            self._write("DELETE FROM key_slots WHERE being_id = ?", [(being_id.hex,)], durable=True)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return len(rows)

    def export(self, being_id: UUID) -> dict[str, tuple[bytes, str | None, str | None, str | None]]:
        """The being's keys: {slot hex: (key, key id hex, subject, item id hex)}; the untagged too
        (a tag lost to a power cut: its events are exported, so must be their key)."""
        self.flush()
        if not self.path.exists():
            return {}
        with self._lock:
            rows = self._db().execute(
                "SELECT slot, key, key_id, subject, item_id FROM key_slots WHERE being_id = ?",
                [being_id.hex],
            )
            return {r[0]: (bytes(r[1]), r[2], r[3], r[4]) for r in rows}

    def add(
        self,
        slot: UUID,
        key_id: UUID | None,
        being_id: UUID,
        key: bytes,
        subject: str | None,
        item_id: UUID | None,
    ) -> bool:
        with self._lock:
            cur = self._db().execute(
                "INSERT OR IGNORE INTO key_slots (slot, key_id, being_id, subject, item_id, key) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    slot.hex,
                    key_id.hex if key_id else None,
                    being_id.hex,
                    subject,
                    item_id.hex if item_id else None,
                    key,
                ],
            )
            return cur.rowcount > 0

    def _close_background_connections(self) -> None:
        for conn in (self._bg, self._bg_durable):
            if conn is not None:
                conn.close()
        self._bg = self._bg_durable = None

    def close(self) -> None:
        self.flush()
        # End the background thread and close its connections: a process that opens and closes many
        # deployments (a server's tests, a worker) would otherwise keep a thread and two SQLite
        # connections, with their page caches, per deployment it ever opened.
        with self._wake:
            writer, self._writer = self._writer, None
            self._closing = True
            self._wake.notify_all()
        if writer is not None:
            writer.join(timeout=_OPEN_WAIT_S)
        with self._lock:
            unused = [(slot.hex,) for free in self._free.values() for slot, _ in free]
            self._free.clear()
            if unused:  # never handed out: nothing was sealed under them
                self._write("DELETE FROM key_slots WHERE slot = ? AND key_id IS NULL", unused, durable=False)
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Batch:
    """A batch's tagged keys on their way to disk."""

    def __init__(
        self, being: UUID, rows: Sequence[tuple[UUID, UUID, str | None, UUID | None, bytes]]
    ) -> None:
        self.being = being
        self.rows = rows
        self.done = threading.Event()
        self.error: BaseException | None = None

    def write(self, keys: OwnedKeys) -> None:
        try:
            _insert(keys._durable_bg(), self.being, self.rows, alone=True)
        except BaseException as exc:  # a full disk: the save that took these keys fails
            self.error = exc
            with keys._lock:
                keys._unknow(self.rows)
        finally:
            self.done.set()


_TAG = """
UPDATE key_slots SET key_id = t.value ->> 0, subject = t.value ->> 1, item_id = t.value ->> 2
FROM json_each(?) AS t WHERE key_slots.slot = t.value ->> 3
"""
_INSERT = """
INSERT INTO key_slots (slot, being_id, key_id, subject, item_id, key)
SELECT lower(hex(substr(:slots, t.key * 16 + 1, 16))), :being,
       nullif(lower(hex(substr(:ids, t.key * 16 + 1, 16))), :none), t.value,
       nullif(lower(hex(substr(:items, t.key * 16 + 1, 16))), :none), substr(:keys, t.key * 32 + 1, 32)
FROM json_each(:subjects) AS t
"""
# Many rows go in one statement (a JSON array, the keys as one blob), not `executemany`: the sqlite3
# module lets go of the interpreter's lock around each statement, so a statement per row makes the
# background thread and the saving thread take turns at the lock hundreds of times per save (each
# turn a wait); one statement runs its thousands of rows at once, off the lock.


def _insert(
    db: sqlite3.Connection,
    being: UUID,
    rows: Sequence[tuple[UUID, UUID | None, str | None, UUID | None, bytes]],
    *,
    alone: bool = False,
) -> None:
    """New slots of a being (slot, key id, subject, item, key), on disk when this returns. `alone`: on a
    connection kept at `synchronous=FULL` (the background thread's), the INSERT runs as the one
    statement of its own transaction (atomic, flushed as it commits): one call into SQLite instead of
    five (pragma, begin, insert, commit, pragma), each of which gave up and took back the
    interpreter's lock, a wait each time the saving thread held it."""
    # The ids go as blobs of 16 bytes each, turned into hex by SQLite (C, off the interpreter's lock);
    # building them is `int.to_bytes` per id (0.8 µs a row instead of 1.9 for a JSON array of hex
    # strings, on the thread that holds the lock while the saving thread encrypts). The subjects (the
    # only text) are the JSON array the statement walks; an all-zero id stands for NULL.
    none = bytes(16)
    params = {
        "being": being.hex,
        "slots": b"".join(r[0].int.to_bytes(16, "big") for r in rows),
        "ids": b"".join(r[1].int.to_bytes(16, "big") if r[1] else none for r in rows),
        "items": b"".join(r[3].int.to_bytes(16, "big") if r[3] else none for r in rows),
        "keys": b"".join(r[4] for r in rows),
        "subjects": json.dumps([r[2] for r in rows]),
        "none": none.hex(),
    }
    if alone:
        db.execute(_INSERT, params)
        return
    _run_one(db, _INSERT, params, durable=True)


def _to_wal(conn: sqlite3.Connection) -> None:
    """`PRAGMA journal_mode=WAL`, tried again while another connection holds the file: processes
    opening a new file at once race to convert it, and SQLite refuses the loser at once (`database
    is locked`, its busy timeout not applied: waiting could deadlock), as seen with three writers."""
    deadline = time.monotonic() + _OPEN_WAIT_S
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(0.1, pause * 2)


@contextmanager
def _transaction(db: sqlite3.Connection, *, durable: bool) -> Iterator[None]:
    """One transaction; `durable`: flushed to disk before it ends (`synchronous=FULL`)."""
    if durable:
        db.execute("PRAGMA synchronous=FULL")
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        if durable:
            db.execute("PRAGMA synchronous=NORMAL")


def _run_one(
    db: sqlite3.Connection, sql: str, params: Sequence[object] | Mapping[str, object], *, durable: bool
) -> None:
    """One statement in one transaction; `durable`: flushed to disk before it returns."""
    with _transaction(db, durable=durable):
        db.execute(sql, params)


def _run(db: sqlite3.Connection, sql: str, rows: Sequence[Sequence[object]], durable: bool) -> None:
    """One transaction; `durable`: flushed to disk before it returns (`synchronous=FULL`)."""
    if not durable and len(rows) == 1:
        db.execute(sql, rows[0])  # one statement commits by itself (autocommit)
        return
    with _transaction(db, durable=durable):
        db.executemany(sql, rows)
