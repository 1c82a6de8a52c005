"""The keys of items and subjects (ADR 0075), beside `keys.json`: one SQLite file, 0600.

A being has one key; its notes, messages, facts, nodes and conversations have one each, so there
are as many as items. `keys.json` is rewritten whole on each change, right for a few keys per being
but not for one per note; here a block of keys is one row (`key_blocks.py`, ADR 0094).

**A pool reserved in blocks** (ADR 0075): keys are created ahead, per being, a block at a time in one
transaction flushed to disk (`synchronous=FULL`), each under a unique *slot* id, reserved by this
process (in memory only: no other process ever sees them as free). Handing one to an item is a pop
from memory plus a row of `block_tags` writing its tags (key id = the item's, subject, item) without waiting for
the disk (`synchronous=NORMAL`, WAL: safe against a process crash, not a power cut). The sealed
header names the slot (`shredding.py`, `EGK2`), so a key is found by it even when its tags were lost;
forgetting recovers lost tags from the events themselves (`ShreddingStorage.recover_tags`). A key
is never lost while an event sealed under it survives: its row was on disk before the event was
written. A slot is handed out once: only the process that reserved it hands it out, and a process
that dies leaves its unused slots unused (a few KB, deleted with the being).

**A batch** (a save taking 256 keys or more) does not use the pool: its keys are written already
tagged, as one block row (keys, key ids and items as blobs), by the background thread while the
saving thread encrypts the batch, and the encryption of its last event waits until they are on disk
(`settle`). One flush per batch costs less than a tag row per key.

A destroyed key is zeroed in place in its block (`secure_delete`; the file is VACUUMed by the
erasure's scrub) and a tombstone goes to `keys.json`, which every process already watches. Keys read
are kept in memory (a block at a time).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID, SafeUUID

import structlog

from engram.adapters import key_blocks as blocks
from engram.adapters.storage_full import reported_as_storage_full

log = structlog.get_logger(__name__)
_KEY_BYTES = blocks.KEY_BYTES  # AES-256-GCM
_FIRST_BLOCK = 16
_MAX_CACHED = 65_536
"""Keys each in-memory map (`_by_key`, `_by_slot`) holds at most: ~280 bytes a key (measured with
tracemalloc at 20k notes), so a server that took or read a million keys held ~280 MB. Past it a map
starts again: a key dropped is found again from its aggregate's first event in the log (its slot)
and its block (one read for up to 4096 keys); a key dropped before its first event was written is
given a second slot, which reading and forgetting already allow (ADR 0094)."""
_MAX_BLOCK = 4096
"""A being's first block is small (a being with three notes does not hold thousands of keys); each
next block doubles (and covers at least twice the save that asked for it), up to 4096: a steady
ingest, one note at a time or in batches of 500, pays one flush per thousands of new items. A
process that closes deletes its unused reservations; one killed leaves them (never used)."""
_SCHEMA = (
    """
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
    + blocks.SCHEMA
)
# `key_slots`: the layout before ADR 0094 (one row per key), still read, forgotten and exported, and
# where imported keys go. New keys are rows of `key_blocks` (one row per block, `key_blocks.py`).
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
        # Destroyed item and subject keys (by their ids' `int`), read from `destroyed_keys` as they come.
        self.destroyed: set[int] = set()
        self._destroyed_seen = 0
        self._free: dict[UUID, list[tuple[UUID, bytes]]] = {}  # being → slots reserved, unused
        self._block: dict[UUID, int] = {}
        # The tags and the next blocks are written by a thread of their own (its own connection):
        # a save only takes keys from memory. Nothing waits for it but forgetting and closing.
        self._wake = threading.Condition()
        self._pending: list[
            tuple[str, str | None, str | None, str, int]
        ] = []  # key, subject, item, base, index
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
        # On a full disk, creating the file or turning it to WAL fails: the user is told this file.
        with reported_as_storage_full(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            try:
                _to_wal(conn)
                conn.execute("PRAGMA secure_delete=ON")  # a destroyed key's bytes are zeroed in the file
                # NORMAL: tags (reservations on this connection ask for FULL themselves); FULL: the
                # background thread's connection for blocks and batches, each statement flushed as it commits.
                conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
            except BaseException:
                conn.close()
                raise
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
                    self._bg.execute(blocks.TAG, [json.dumps(tags)])  # one statement: its own transaction
                for being, size in refill.items():
                    block = _Block.new(being, size)
                    block.insert(self._durable_bg(), alone=True)
                    with self._lock:  # on disk now: usable
                        self._free.setdefault(being, [])[:0] = reversed(block.slots)
            except Exception as exc:  # a full disk: the tags are recovered from the log when forgetting
                log.warning("owned_keys_background_failed", error=repr(exc))

    def _durable_bg(self) -> sqlite3.Connection:
        """The background thread's connection for rows that must be on disk (`synchronous=FULL`)."""
        if self._bg_durable is None:
            self._bg_durable = self._connect(durable=True)
        return self._bg_durable

    def _enqueue(
        self, tags: list[tuple[str, str | None, str | None, str, int]], refill: dict[UUID, int]
    ) -> None:
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

    def _reserve(self, being_id: UUID) -> None:
        """Create a block of keys for the being, flushed to disk before any is used."""
        size = self._block.get(being_id, _FIRST_BLOCK)
        self._block[being_id] = min(_MAX_BLOCK, size * 2)
        block = _Block.new(being_id, size)
        block.insert(self._db())
        self._free.setdefault(being_id, []).extend(reversed(block.slots))

    def _known(self, key_id: UUID, *, new: bool = False) -> tuple[UUID, bytes] | None:
        found = self._by_key.get(key_id.int)
        if found is None and not new and self.path.exists():
            # Another process may hold this item's key (a node written elsewhere, a conversation).
            row = blocks.find(self._db(), key_id)
            if row is not None:
                found = self._by_key[key_id.int] = (UUID(int=row[0]), row[1])
        return found

    def slot_for_writing(
        self, key_id: UUID, being_id: UUID, subject: str | None, item_id: UUID | None
    ) -> tuple[UUID, bytes]:
        """The slot and key to seal the key id's events with, taken from the pool on first use."""
        with self._lock:
            self._bound()
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
            self._bound()
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
        tagged: list[tuple[_Block, bool]] = []  # (a block of tagged keys, written by the background thread)
        tags: list[tuple[str, str | None, str | None, str, int]] = []
        refill: dict[UUID, int] = {}
        by_key, by_slot = self._by_key, self._by_slot
        for being, items in by_being.items():
            free = self._free.setdefault(being, [])
            direct = len(items) >= _DIRECT_AT
            if not direct and len(items) > len(free) and len(items) <= self._block.get(being, _FIRST_BLOCK):
                self._reserve(being)  # one flush for the next thousands of single items
            if direct or len(items) > len(free):
                # A batch (or a save larger than a block): its keys are written already tagged, as one
                # block row and one flush (from the pool each would cost a tag row too).
                for block in _Block.tagged(being, items):
                    for (key_id, *_), slot_key in zip(block.tags, block.slots, strict=True):
                        by_key[key_id.int] = slot_key
                        by_slot[slot_key[0].int] = slot_key[1]
                    tagged.append((block, direct))
                if direct:
                    continue
            else:
                split = blocks.split
                for key_id, _, subject, item in items:
                    slot, key = free.pop()
                    by_key[key_id.int] = (slot, key)
                    by_slot[slot.int] = key
                    base, index = split(slot.int)
                    tags.append((key_id.hex, subject, item.hex if item else None, blocks.hex32(base), index))
            # The next saves of this size find their keys ready: the block grows with the saves and
            # is written ahead by the background thread.
            size = self._block.get(being, _FIRST_BLOCK)
            if len(free) < max(size // 4, 2 * len(items)) and being not in self._refill:
                grown = min(_MAX_BLOCK, max(size, 4 * len(items)))
                self._block[being] = min(_MAX_BLOCK, grown * 2)
                refill[being] = grown
        for block, direct in tagged:
            if direct:
                self._write_soon(block)
            else:
                try:
                    block.insert(self._db())
                except BaseException:
                    self._unknow(block)
                    raise
        if tags or refill:
            # The tags need not reach the disk before the event: the header names the slot (see above).
            self._enqueue(tags, refill)

    def _unknow(self, block: _Block) -> None:
        """Forget keys whose block could not be written: nothing may be sealed under them."""
        for (slot, _), (key_id, *_) in zip(block.slots, block.tags, strict=True):
            self._by_slot.pop(slot.int, None)
            if self._by_key.get(key_id.int, (None,))[0] == slot:
                del self._by_key[key_id.int]

    def _write_soon(self, block: _Block) -> None:
        """A batch's keys, written and flushed by the background thread while the saving thread
        encrypts the batch; the save waits for them (`settle`) before its events are written."""
        batch = _Batch(block)
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
                key = self._read_slot(slot.int)
        return key

    def _read_slot(self, slot: int) -> bytes | None:
        """A slot's key from the file: its whole block is kept in memory (a rebuild reads each item's
        key once, the items of a block together); a slot of the earlier layout by itself."""
        self._bound()
        db = self._db()
        base, index = blocks.split(slot)
        keys = blocks.block_keys(db, base)
        if keys is not None:
            by_slot = self._by_slot
            for i in range(len(keys) // _KEY_BYTES):
                found = blocks.key_at(keys, i)
                if found is not None:
                    by_slot[base | i << blocks.RANK_SHIFT] = found
            return blocks.key_at(keys, index)
        row = db.execute("SELECT key FROM key_slots WHERE slot = ?", [blocks.hex32(slot)]).fetchone()
        if row is None:
            return None
        key = self._by_slot[slot] = bytes(row[0])
        return key

    def get(self, key_id: UUID) -> bytes | None:
        with self._lock:
            found = self._known(key_id)
        return found[1] if found else None

    def _entries(self, being_id: UUID) -> list[blocks.Entry]:
        self.flush()
        if not self.path.exists():
            return []
        with self._lock:
            return list(blocks.entries(self._db(), being_id))

    def untagged(self, being_id: UUID) -> list[UUID]:
        """The being's slots with no key id: reserved and unused, or used with tags a power cut lost."""
        self.flush()
        if not self.path.exists():
            return []
        with self._lock:
            # The slots this process reserved and has not handed out are known unused: left out, so a
            # forget in the process that took the notes finds nothing to recover (no scan of the log).
            mine = {slot.int for slot, _ in self._free.get(being_id, ())}
            return [UUID(int=s) for s in blocks.untagged(self._db(), being_id) if s not in mine]

    def tag(self, slot: UUID, key_id: UUID, subject: str | None, item_id: UUID | None) -> None:
        """Write back the tags of a used slot (recovered from the event it sealed)."""
        self.flush()
        item = item_id.hex if item_id else None
        with self._lock:
            db = self._db()
            base, index = blocks.split(slot.int)
            if blocks.block_keys(db, base) is not None:
                tags = json.dumps([[key_id.hex, subject, item, blocks.hex32(base), index]])
                _run_one(db, blocks.TAG, [tags], durable=True)
                return
            self._write(
                "UPDATE key_slots SET key_id = ?, subject = ?, item_id = ? WHERE slot = ? AND key_id IS NULL",
                [(key_id.hex, subject, item, slot.hex)],
                durable=True,
            )

    def ids_of(self, being_id: UUID, subject: str | None = None, item_id: UUID | None = None) -> list[UUID]:
        """The key ids of the being's live keys (with this subject, or of this item or quoting it)."""
        if subject is None and item_id is None:
            found = dict.fromkeys(e[2] for e in self._entries(being_id) if e[2] is not None)
            return [UUID(hex=k) for k in found]
        self.flush()
        if not self.path.exists():
            return []
        item = item_id.hex if item_id else None
        where, params = blocks.tag_filter("", subject, item)
        sql = "SELECT DISTINCT key_id FROM key_slots WHERE being_id = ? AND key_id IS NOT NULL" + where  # noqa: S608 (fixed conditions, values as parameters)
        with self._lock:
            db = self._db()
            names = dict.fromkeys(blocks.tagged(db, being_id, subject, item))
            names.update((r[0], None) for r in db.execute(sql, [being_id.hex, *params]))
        return [UUID(hex=k) for k in names]

    def _bound(self) -> None:
        """Start a map again once it holds `_MAX_CACHED` keys (under the lock, before a call adds to
        it: what the call returns was read from the maps after)."""
        if len(self._by_key) >= _MAX_CACHED:
            self._by_key.clear()
        if len(self._by_slot) >= _MAX_CACHED:
            self._by_slot.clear()

    def _forget_cached(self, slots: Iterable[int], key_ids: Iterable[UUID]) -> None:
        for slot in slots:
            self._by_slot.pop(slot, None)
        for key_id in key_ids:
            self._by_key.pop(key_id.int, None)

    def refresh_destroyed(self) -> None:
        """Read the key ids destroyed (by any process) since this one last looked: a few rows, or none
        (one lookup of the table's primary key)."""
        if not self.path.exists():
            return
        with self._lock:
            rows = (
                self._db()
                .execute(
                    "SELECT n, key_id FROM destroyed_keys WHERE n > ? ORDER BY n", [self._destroyed_seen]
                )
                .fetchall()
            )
            if rows:
                self.destroyed.update(int.from_bytes(r[1], "big") for r in rows)
                self._destroyed_seen = rows[-1][0]

    def delete(self, key_ids: Iterable[UUID]) -> int:
        """Destroy these key ids: each recorded in `destroyed_keys` (its tombstone), and every slot of
        it (a key id may have several: two processes, a lost tag) zeroed in place in its block (ADR
        0094), rows of the earlier layout deleted, in one transaction. Returns how many key ids were
        not destroyed before."""
        self.flush()
        ids = list(dict.fromkeys(key_ids))
        names = [k.hex for k in ids]
        if not names:
            return 0
        with self._lock:
            db = self._db()
            wanted = json.dumps(names)
            positions = blocks.positions_of(db, names)
            rows = db.execute(
                "SELECT slot FROM key_slots WHERE key_id IN (SELECT value FROM json_each(?))", [wanted]
            ).fetchall()
            slots = [int(r[0], 16) for r in rows]
            slots += [base | i << blocks.RANK_SHIFT for base, idx in positions.items() for i in idx]
            self._forget_cached(slots, ids)
            with _transaction(db, durable=True):
                before = db.total_changes
                db.executemany(
                    "INSERT OR IGNORE INTO destroyed_keys (key_id) VALUES (?)", [(k.bytes,) for k in ids]
                )
                fresh = db.total_changes - before
                blocks.zero(db, positions)
                db.execute("DELETE FROM key_slots WHERE key_id IN (SELECT value FROM json_each(?))", [wanted])
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.destroyed.update(k.int for k in ids)
            return fresh

    def delete_being(self, being_id: UUID) -> int:
        """Delete every row of the being, reserved or used, tagged or not (`forget being`)."""
        entries = self._entries(being_id)
        if not self.path.exists():
            return 0
        with self._lock:
            db = self._db()
            self._forget_cached([e[0] for e in entries], [UUID(hex=e[2]) for e in entries if e[2]])
            self._free.pop(being_id, None)
            with _transaction(db, durable=True):
                db.execute(
                    "DELETE FROM block_tags WHERE base IN (SELECT base FROM key_blocks WHERE being_id = ?)",
                    [being_id.hex],
                )
                db.execute("DELETE FROM key_blocks WHERE being_id = ?", [being_id.hex])
                db.execute("DELETE FROM key_slots WHERE being_id = ?", [being_id.hex])
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return len(entries)

    def export(self, being_id: UUID) -> dict[str, tuple[bytes, str | None, str | None, str | None]]:
        """The being's keys: {slot hex: (key, key id hex, subject, item id hex)}; the untagged too
        (a tag lost to a power cut: its events are exported, so must be their key)."""
        return {blocks.hex32(e[0]): (e[1], e[2], e[3], e[4]) for e in self._entries(being_id)}

    def add(
        self,
        slot: UUID,
        key_id: UUID | None,
        being_id: UUID,
        key: bytes,
        subject: str | None,
        item_id: UUID | None,
    ) -> bool:
        """An imported key, as one row of its own (`key_slots`), unless this file has its block."""
        with self._lock:
            db = self._db()
            if blocks.block_keys(db, blocks.split(slot.int)[0]) is not None:
                return False
            cur = db.execute(
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
            unused: dict[int, list[int]] = {}
            for free in self._free.values():
                for slot, _ in free:
                    base, index = blocks.split(slot.int)
                    unused.setdefault(base, []).append(index)
            self._free.clear()
            if unused:  # never handed out, nothing sealed under them: zeroed (`untagged` skips them)
                db = self._db()
                with _transaction(db, durable=False):
                    blocks.zero(db, unused)
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Block:
    """New keys as one block row: key i's slot is `base | i << 64` (ADR 0094)."""

    def __init__(self, being: UUID, count: int) -> None:
        # Keys from one read of the system's randomness; a base that grows with time (milliseconds,
        # rank 0, 8 random bytes), so new rows land at the end of the base index (random slots wrote
        # a page per row; ADR 0075).
        material = secrets.token_bytes(8 + _KEY_BYTES * count)
        self.being = being
        self.base = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(material[:8], "big")
        self.keys = material[8:]
        self.tags: list[Tags] = []
        # The UUIDs are built as `UUID.__init__` builds them (its two slots set), without its checks
        # of arguments it is not given: 0.25 µs a slot instead of 1 (`int` is 128 bits by
        # construction: 48 of milliseconds, 16 of rank, 64 random).
        make, put, unknown = object.__new__, object.__setattr__, SafeUUID.unknown
        keys, base, shift = self.keys, self.base, blocks.RANK_SHIFT
        slots: list[tuple[UUID, bytes]] = []
        for i in range(count):
            slot = make(UUID)
            put(slot, "int", base | i << shift)
            put(slot, "is_safe", unknown)
            slots.append((slot, keys[i * _KEY_BYTES : (i + 1) * _KEY_BYTES]))
        self.slots = slots

    @classmethod
    def new(cls, being: UUID, count: int) -> _Block:
        return cls(being, min(count, blocks.MAX_KEYS))

    @classmethod
    def tagged(cls, being: UUID, wanted: Sequence[Tags]) -> list[_Block]:
        """Blocks of keys for these key ids (a batch), each key's tags written with it."""
        out = []
        for start in range(0, len(wanted), blocks.MAX_KEYS):
            part = wanted[start : start + blocks.MAX_KEYS]
            block = cls(being, len(part))
            block.tags = list(part)
            out.append(block)
        return out

    def insert(self, db: sqlite3.Connection, *, alone: bool = False) -> None:
        """On disk when this returns. `alone`: on a connection kept at `synchronous=FULL` (the
        background thread's), the INSERT runs as the one statement of its own transaction (atomic,
        flushed as it commits): one call into SQLite instead of five (pragma, begin, insert, commit,
        pragma), each of which gave up and took back the interpreter's lock, a wait each time the
        saving thread held it. One row for the whole block: the per-row work of ADR 0075 (~4 µs of
        SQLite a key on the background thread) is gone."""
        ids = items = subjects = None
        if self.tags:
            none = blocks.NO_ID
            ids = b"".join([t[0].int.to_bytes(16, "big") for t in self.tags])
            items = b"".join([t[3].int.to_bytes(16, "big") if t[3] else none for t in self.tags])
            subjects = json.dumps([t[2] for t in self.tags])
        params = [blocks.hex32(self.base), self.being.hex, self.keys, ids, items, subjects]
        if alone:
            db.execute(blocks.INSERT, params)
            return
        _run_one(db, blocks.INSERT, params, durable=True)


class _Batch:
    """A batch's tagged keys on their way to disk."""

    def __init__(self, block: _Block) -> None:
        self.block = block
        self.done = threading.Event()
        self.error: BaseException | None = None

    def write(self, keys: OwnedKeys) -> None:
        try:
            self.block.insert(keys._durable_bg(), alone=True)
        except BaseException as exc:  # a full disk: the save that took these keys fails
            self.error = exc
            with keys._lock:
                keys._unknow(self.block)
        finally:
            self.done.set()


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
