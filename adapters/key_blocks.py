"""Item keys as one row per block (ADR 0094): the SQL of `keys.owned.sqlite3`'s `key_blocks`.

A block of n keys is one row: its keys as one blob of n × 32 bytes, its being, and the slot of its
first key (`base`). Key i of the block is the slot `base | i << 64` (the 16 "rank" bits of the slot
ids of ADR 0075: milliseconds, rank, 8 random bytes), so the sealed `EGK2` header keeps its shape and
a slot is found by one lookup of its base. A batch's block carries its tags (key ids and items as
blobs of n × 16 bytes, subjects as a JSON array), written with the keys; a pool block's keys get their
tags later, one row each in `block_tags`, written without waiting for the disk (ADR 0075).

A destroyed key is **zeroed in place** (`secure_delete` is on): its row is rewritten with 32 zero
bytes where the key was, and its key id goes to `destroyed_keys` in the same transaction (16 bytes,
numbered: each process reads only the rows added since it last looked, instead of `keys.json`
rewritten and re-read whole with one tombstone per item). Rows of the earlier layout (`key_slots`,
one row per key) still read, are still forgotten and exported; imported keys go there (one row per
slot, whatever its shape).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from uuid import UUID

KEY_BYTES = 32
RANK_SHIFT = 64
RANK_MASK = 0xFFFF << RANK_SHIFT
MAX_KEYS = 0x10000  # a block's keys are numbered by the slot's 16 rank bits
ZERO_KEY = bytes(KEY_BYTES)
NO_ID = bytes(16)

SCHEMA = """
CREATE TABLE IF NOT EXISTS key_blocks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    base TEXT NOT NULL UNIQUE,  -- slot of key 0 (hex); key i is base | i << 64: on disk before any use
    being_id TEXT NOT NULL,     -- durable with the keys: forgetting the being deletes its blocks
    keys BLOB NOT NULL,         -- n × 32 bytes, a destroyed key zeroed in place
    ids BLOB,                   -- a batch's key ids (n × 16); NULL for a pool block (`block_tags`)
    items BLOB,                 -- a batch's items (n × 16, zeros: none)
    subjects TEXT               -- a batch's subjects (JSON array of n)
);
CREATE INDEX IF NOT EXISTS key_blocks_being ON key_blocks (being_id);
CREATE TABLE IF NOT EXISTS destroyed_keys (
    n INTEGER PRIMARY KEY AUTOINCREMENT,  -- every process reads the rows past the last it saw
    key_id BLOB NOT NULL UNIQUE           -- 16 bytes: an item's or a subject's key, destroyed
);
CREATE TABLE IF NOT EXISTS block_tags (
    base TEXT NOT NULL,
    idx INTEGER NOT NULL,
    key_id TEXT NOT NULL,
    subject TEXT,
    item_id TEXT,
    PRIMARY KEY (base, idx)
) WITHOUT ROWID;
"""
# As in ADR 0075, no index on key ids (random: one more random page written per new key): forgetting
# finds a key id's slots in one pass.

INSERT = "INSERT INTO key_blocks (base, being_id, keys, ids, items, subjects) VALUES (?, ?, ?, ?, ?, ?)"
TAG = """
INSERT OR IGNORE INTO block_tags (base, idx, key_id, subject, item_id)
SELECT t.value ->> 3, t.value ->> 4, t.value ->> 0, t.value ->> 1, t.value ->> 2 FROM json_each(?) AS t
"""
"""Pool tags: one statement for many (a JSON array of [key id, subject, item, base, index])."""

Entry = tuple[int, bytes, str | None, str | None, str | None]
"""(slot as an int, key, key id hex, subject, item hex) of one live key."""


def split(slot: int) -> tuple[int, int]:
    """(base, index) of a slot."""
    return slot & ~RANK_MASK, (slot & RANK_MASK) >> RANK_SHIFT


def hex32(number: int) -> str:
    return f"{number:032x}"


def block_keys(db: sqlite3.Connection, base: int) -> bytes | None:
    row = db.execute("SELECT keys FROM key_blocks WHERE base = ?", [hex32(base)]).fetchone()
    return None if row is None else bytes(row[0])


def key_at(keys: bytes, index: int) -> bytes | None:
    key = keys[index * KEY_BYTES : (index + 1) * KEY_BYTES]
    return key if len(key) == KEY_BYTES and key != ZERO_KEY else None


def _ids(blob: bytes | None, n: int) -> list[str | None]:
    if blob is None:
        return [None] * n
    out: list[str | None] = []
    for i in range(n):
        part = blob[i * 16 : (i + 1) * 16]
        out.append(None if part == NO_ID else part.hex())
    return out


def entries(db: sqlite3.Connection, being_id: UUID) -> Iterator[Entry]:
    """Every live key of the being, in both layouts, tagged or not."""
    tags: dict[tuple[str, int], tuple[str, str | None, str | None]] = {
        (r[0], r[1]): (r[2], r[3], r[4])
        for r in db.execute(
            "SELECT t.base, t.idx, t.key_id, t.subject, t.item_id FROM block_tags t "
            "JOIN key_blocks b ON b.base = t.base WHERE b.being_id = ?",
            [being_id.hex],
        )
    }
    rows = db.execute(
        "SELECT base, keys, ids, items, subjects FROM key_blocks WHERE being_id = ? ORDER BY id",
        [being_id.hex],
    ).fetchall()
    for base_hex, keys, ids, items, subjects in rows:
        base = int(base_hex, 16)
        n = len(keys) // KEY_BYTES
        key_ids, item_ids = _ids(ids, n), _ids(items, n)
        subject_of: list[str | None] = json.loads(subjects) if subjects else [None] * n
        for i in range(n):
            key = key_at(keys, i)
            if key is None:
                continue
            slot = base | i << RANK_SHIFT
            if ids is None:
                tag = tags.get((base_hex, i))
                yield (slot, key, *tag) if tag else (slot, key, None, None, None)
            else:
                yield slot, key, key_ids[i], subject_of[i], item_ids[i]
    for r in db.execute(
        "SELECT slot, key, key_id, subject, item_id FROM key_slots WHERE being_id = ? ORDER BY id",
        [being_id.hex],
    ):
        yield int(r[0], 16), bytes(r[1]), r[2], r[3], r[4]


def tag_filter(prefix: str, subject: str | None, item: str | None) -> tuple[str, list[str]]:
    """SQL conditions (and their values) on tag columns: this subject; this item's key or one quoting it."""
    sql, params = "", []
    if subject is not None:
        sql += f" AND {prefix}subject = ?"
        params.append(subject)
    if item is not None:
        sql += f" AND ({prefix}item_id = ? OR {prefix}key_id = ?)"
        params += [item, item]
    return sql, params


def tagged(db: sqlite3.Connection, being_id: UUID, subject: str | None, item: str | None) -> list[str]:
    """The key ids (hex) of the being's live keys with this subject and/or of this item (its own key
    or one quoting it), filtered by SQLite: only the blocks that hold a match are read in Python
    (`forget subject` asks once per key of the subject)."""
    found: dict[str, None] = {}
    where, params = tag_filter("t.", subject, item)
    # The pool's tags first, their keys read only for the blocks that match (a condition on the keys'
    # blob in SQL read a block's whole blob per tag row: 70 ms a call at 20k nodes).
    sql = (
        "SELECT t.key_id, t.base, t.idx FROM block_tags t JOIN key_blocks b ON b.base = t.base "
        "WHERE b.being_id = ?"
    )
    matches = db.execute(sql + where, [being_id.hex, *params]).fetchall()
    live: dict[str, bytes | None] = {}
    for key_id, base_hex, idx in matches:
        if base_hex not in live:
            live[base_hex] = block_keys(db, int(base_hex, 16))
        keys = live[base_hex]
        if keys is not None and key_at(keys, int(idx)) is not None:
            found[key_id] = None
    if subject is not None:  # a batch's subjects: the indexes that match, per block
        rows = db.execute(
            "SELECT b.id, json_group_array(t.key) FROM key_blocks b, json_each(b.subjects) AS t "
            "WHERE b.being_id = ? AND b.ids IS NOT NULL AND t.value = ? GROUP BY b.id",
            [being_id.hex, subject],
        ).fetchall()
        wanted = {int(r[0]): json.loads(r[1]) for r in rows}
    elif item is None:
        return list(found)
    else:
        needle = bytes.fromhex(item)
        rows = db.execute(
            "SELECT id FROM key_blocks WHERE being_id = ? AND ids IS NOT NULL "
            "AND (instr(ids, ?) > 0 OR instr(items, ?) > 0)",
            [being_id.hex, needle, needle],
        ).fetchall()
        wanted = {int(r[0]): None for r in rows}
    for block_id, indexes in wanted.items():
        keys, ids, items = db.execute(
            "SELECT keys, ids, items FROM key_blocks WHERE id = ?", [block_id]
        ).fetchone()
        n = len(keys) // KEY_BYTES
        key_ids, item_ids = _ids(ids, n), _ids(items, n)
        for i in indexes if indexes is not None else range(n):
            key_id = key_ids[i]
            if key_id is None or key_at(keys, i) is None:
                continue
            if item is None or item in (key_id, item_ids[i]):
                found[key_id] = None
    return list(found)


def untagged(db: sqlite3.Connection, being_id: UUID) -> list[int]:
    """The being's live slots without tags: in pool blocks (a batch's are tagged with their keys) and
    in rows of the earlier layout."""
    tags = {
        (r[0], r[1])
        for r in db.execute(
            "SELECT t.base, t.idx FROM block_tags t JOIN key_blocks b ON b.base = t.base "
            "WHERE b.being_id = ? AND b.ids IS NULL",
            [being_id.hex],
        )
    }
    out = []
    for base_hex, keys in db.execute(
        "SELECT base, keys FROM key_blocks WHERE being_id = ? AND ids IS NULL ORDER BY id", [being_id.hex]
    ):
        base = int(base_hex, 16)
        for i in range(len(keys) // KEY_BYTES):
            if (base_hex, i) not in tags and key_at(keys, i) is not None:
                out.append(base | i << RANK_SHIFT)
    out += [
        int(r[0], 16)
        for r in db.execute(
            "SELECT slot FROM key_slots WHERE being_id = ? AND key_id IS NULL ORDER BY id", [being_id.hex]
        )
    ]
    return out


def positions_of(db: sqlite3.Connection, key_ids: list[str]) -> dict[int, list[int]]:
    """{base: [index]} of every block slot handed to one of these key ids (any being: one pass)."""
    wanted = json.dumps(key_ids)
    found: dict[int, list[int]] = {}
    for base_hex, idx in db.execute(
        "SELECT base, idx FROM block_tags WHERE key_id IN (SELECT value FROM json_each(?))", [wanted]
    ):
        found.setdefault(int(base_hex, 16), []).append(int(idx))
    as_bytes = {bytes.fromhex(k) for k in key_ids}
    for base_hex, ids in db.execute("SELECT base, ids FROM key_blocks WHERE ids IS NOT NULL"):
        blob = bytes(ids)
        for i in range(len(blob) // 16):
            if blob[i * 16 : (i + 1) * 16] in as_bytes:
                found.setdefault(int(base_hex, 16), []).append(i)
    return found


def zero(db: sqlite3.Connection, positions: dict[int, list[int]]) -> int:
    """Overwrite these keys with zeros, each block rewritten once (the caller's transaction); returns
    how many live keys were zeroed."""
    zeroed = 0
    for base, indexes in positions.items():
        keys = block_keys(db, base)
        if keys is None:
            continue
        new = bytearray(keys)
        for i in indexes:
            if key_at(keys, i) is not None:
                new[i * KEY_BYTES : (i + 1) * KEY_BYTES] = ZERO_KEY
                zeroed += 1
        if new != keys:
            db.execute("UPDATE key_blocks SET keys = ? WHERE base = ?", [bytes(new), hex32(base)])
    return zeroed


def find(db: sqlite3.Connection, key_id: UUID) -> tuple[int, bytes] | None:
    """A live slot handed to this key id (another process's item), in one pass: pool tags, batch
    blocks (their ids blob searched by SQLite), then the earlier layout."""
    for base_hex, idx, keys in db.execute(
        "SELECT t.base, t.idx, b.keys FROM block_tags t JOIN key_blocks b ON b.base = t.base "
        "WHERE t.key_id = ?",
        [key_id.hex],
    ):
        key = key_at(bytes(keys), int(idx))
        if key is not None:
            return int(base_hex, 16) | int(idx) << RANK_SHIFT, key
    needle = key_id.bytes
    for base_hex, ids, keys in db.execute(
        "SELECT base, ids, keys FROM key_blocks WHERE ids IS NOT NULL AND instr(ids, ?) > 0", [needle]
    ):
        blob = bytes(ids)
        at = blob.find(needle)
        while at >= 0 and at % 16:  # the bytes across two ids: look further
            at = blob.find(needle, at + 1)
        key = key_at(bytes(keys), at // 16) if at >= 0 else None
        if key is not None:
            return int(base_hex, 16) | (at // 16) << RANK_SHIFT, key
    row = db.execute(
        "SELECT slot, key FROM key_slots WHERE key_id = ? ORDER BY id LIMIT 1", [key_id.hex]
    ).fetchone()
    return None if row is None else (int(row[0], 16), bytes(row[1]))
