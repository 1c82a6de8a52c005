"""The keys of items and subjects (ADR 0075), beside `keys.json`: one SQLite file, 0600.

A being has one key; its notes, messages, facts, nodes and conversations have one each, so there
are as many as items. `keys.json` is rewritten whole on each change, right for a few keys per being
but not for one per note; here a new key is one inserted row. Each row is tagged with its being, its
subject (a user) and the item whose forgetting destroys it, so that `forget being|subject|note …`
finds every key it must destroy. A destroyed key's row is deleted (the file is VACUUMed with
`secure_delete` by the erasure's scrub) and a tombstone goes to `keys.json`, which every process
already watches.

Keys read are kept in memory (loaded by id, incrementally): a rebuild reads each item's key once.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from uuid import UUID

_KEY_BYTES = 32  # AES-256-GCM
_SCHEMA = """
CREATE TABLE IF NOT EXISTS owned_keys (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: new keys are loaded by it, incrementally
    key_id TEXT NOT NULL UNIQUE,
    being_id TEXT NOT NULL,
    subject TEXT,
    item_id TEXT,
    key BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS owned_keys_being ON owned_keys (being_id, subject);
CREATE INDEX IF NOT EXISTS owned_keys_item ON owned_keys (item_id);
"""


class OwnedKeys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cache: dict[str, bytes] = {}
        self._loaded_rowid = 0

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA secure_delete=ON")  # a destroyed key's bytes are zeroed in the file
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def _load_new(self) -> None:
        rows = self._db().execute(
            "SELECT id, key_id, key FROM owned_keys WHERE id > ? ORDER BY id", [self._loaded_rowid]
        )
        for rowid, key_id, key in rows:
            self._cache[key_id] = bytes(key)
            self._loaded_rowid = max(self._loaded_rowid, int(rowid))

    def get(self, key_id: UUID) -> bytes | None:
        name = key_id.hex
        key = self._cache.get(name)
        if key is None and self.path.exists():
            with self._lock:
                self._load_new()
                key = self._cache.get(name)
                if key is None:  # committed by another process after a later id was read: ask for it
                    row = self._db().execute("SELECT key FROM owned_keys WHERE key_id = ?", [name]).fetchone()
                    if row is not None:
                        key = self._cache[name] = bytes(row[0])
        return key

    def get_or_create(self, key_id: UUID, being_id: UUID, subject: str | None, item_id: UUID | None) -> bytes:
        key = self.get(key_id)
        if key is not None:
            return key
        with self._lock:
            db = self._db()
            # Another process may create the same key at once: the first row wins, both use it.
            db.execute(
                "INSERT OR IGNORE INTO owned_keys (key_id, being_id, subject, item_id, key) VALUES (?, ?, ?, ?, ?)",
                [
                    key_id.hex,
                    being_id.hex,
                    subject,
                    item_id.hex if item_id else None,
                    secrets.token_bytes(_KEY_BYTES),
                ],
            )
            self._load_new()
            key = self._cache.get(key_id.hex)
            if key is None:
                row = db.execute("SELECT key FROM owned_keys WHERE key_id = ?", [key_id.hex]).fetchone()
                key = self._cache[key_id.hex] = bytes(row[0])
            return key

    def create_many(self, wanted: Iterable[tuple[UUID, UUID, str | None, UUID | None]]) -> None:
        """Create the missing keys of a whole save in one transaction: one write to the disk for a
        batch of notes instead of one per note."""
        rows = [
            (k.hex, b.hex, subject, item.hex if item else None, secrets.token_bytes(_KEY_BYTES))
            for k, b, subject, item in wanted
            if k.hex not in self._cache
        ]
        if not rows:
            return
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR IGNORE INTO owned_keys (key_id, being_id, subject, item_id, key) VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._load_new()

    def ids_of(self, being_id: UUID, subject: str | None = None, item_id: UUID | None = None) -> list[UUID]:
        if not self.path.exists():
            return []
        sql = "SELECT key_id FROM owned_keys WHERE being_id = ?"
        params: list[str] = [being_id.hex]
        if subject is not None:
            sql += " AND subject = ?"
            params.append(subject)
        if item_id is not None:
            sql += " AND (item_id = ? OR key_id = ?)"
            params += [item_id.hex, item_id.hex]
        with self._lock:
            return [UUID(hex=r[0]) for r in self._db().execute(sql, params)]

    def delete(self, key_ids: Iterable[UUID]) -> int:
        names = [k.hex for k in key_ids]
        if not names or not self.path.exists():
            return 0
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                gone = 0
                for name in names:
                    gone += db.execute("DELETE FROM owned_keys WHERE key_id = ?", [name]).rowcount
                    self._cache.pop(name, None)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return gone

    def export(self, being_id: UUID) -> dict[str, tuple[bytes, str | None, str | None]]:
        """The being's owned keys: {key id hex: (key, subject, item id hex)}."""
        if not self.path.exists():
            return {}
        with self._lock:
            rows = self._db().execute(
                "SELECT key_id, key, subject, item_id FROM owned_keys WHERE being_id = ?", [being_id.hex]
            )
            return {r[0]: (bytes(r[1]), r[2], r[3]) for r in rows}

    def add(
        self, key_id: UUID, being_id: UUID, key: bytes, subject: str | None, item_id: UUID | None
    ) -> bool:
        with self._lock:
            cur = self._db().execute(
                "INSERT OR IGNORE INTO owned_keys (key_id, being_id, subject, item_id, key) VALUES (?, ?, ?, ?, ?)",
                [key_id.hex, being_id.hex, subject, item_id.hex if item_id else None, key],
            )
            return cur.rowcount > 0

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
