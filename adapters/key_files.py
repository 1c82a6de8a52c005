"""The default key store: one JSON file of data keys under the data dir, readable by its owner only.

Writes go to a temporary file (created 0600) renamed over the old one, so a crash leaves either
store whole. A destroyed key is replaced by a tombstone (no key material) so that `forget` can say
"already forgotten" and nothing is ever encrypted under that id again.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from engram.adapters.owned_keys import OwnedKeys
from engram.services.key_store import KeyDestroyed, KeyStoreError

KEY_FILE = "keys.json"
OWNED_SUFFIX = ".owned.sqlite3"
"""The keys of items and subjects (ADR 0075) live beside the key file: `keys.owned.sqlite3`."""
_OWNED_MARK = "owned:"
"""In an export, an owned key is named by its slot, its value `owned:<subject>:<item id hex>:<key id
hex>:<base64 key>` (subject, item and key id may be empty), so that an import keeps the slots the
sealed headers name and the tags `forget subject|note` look for."""
_DESTROYED = "destroyed"
_KEY_BYTES = 32  # AES-256-GCM
_RECHECK_S = 0.5
"""How stale this process's copy may be: a key another process destroyed stops decrypting here (and
nothing more is sealed under it) within this time."""


class LocalKeyStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}
        self._tombstones = False  # any destroyed key: until one is, a new item key needs no check
        self._json_tombstones = 0  # destroyed keys named in `keys.json` (see `destroyed_version`)
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime, size): each save is a new inode
        self._checked_at = time.monotonic()
        self.owned = OwnedKeys(path.with_name(path.stem + OWNED_SUFFIX))
        self._check_permissions()
        if path.exists():
            self._load()
        self.owned.refresh_destroyed()  # the item keys destroyed so far (ADR 0094)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> LocalKeyStore:
        return cls(data_dir / KEY_FILE)

    @property
    def exists(self) -> bool:
        return self.path.exists()

    @property
    def location(self) -> str:
        return str(self.path)

    def _check_permissions(self) -> None:
        for path in (self.path, self.owned.path):
            if not path.exists():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode & 0o077:
                raise KeyStoreError(
                    f"key store {path} is readable by others (mode {mode:o}): run `chmod 600 {path}`"
                )

    def _load(self) -> None:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise KeyStoreError(f"key store {self.path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("keys"), dict):
            raise KeyStoreError(f"key store {self.path} is not an Engram key store")
        self._keys = {str(k): str(v) for k, v in data["keys"].items()}
        self._json_tombstones = sum(1 for v in self._keys.values() if v == _DESTROYED)
        self._tombstones = self._json_tombstones > 0
        self._seen = _signature(self.path)

    def _refresh(self) -> None:
        """Another process may have added or destroyed a key since: read the file again if it changed."""
        self._checked_at = time.monotonic()
        self.owned.refresh_destroyed()  # item keys destroyed since (ADR 0094): the new rows only
        try:
            seen = _signature(self.path)
        except FileNotFoundError:
            return
        if seen != self._seen:
            self._check_permissions()
            self._load()

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """This process's threads and every other process on the data dir, one at a time: each reads
        the file again and writes it back whole, so two writers adding keys at once both keep theirs
        (a key lost to a race would make what it sealed unreadable)."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._refresh()
                yield
            finally:
                os.close(fd)  # releases the lock

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "keys": self._keys}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._seen = _signature(self.path)

    def key_for_writing(self, key_id: UUID) -> bytes | None:
        """A being's key, created on first use; None once destroyed."""
        name = key_id.hex
        value = self._keys.get(name)
        if value is None:
            with self._exclusive():
                value = self._keys.get(name)
                if value is None:
                    value = base64.b64encode(secrets.token_bytes(_KEY_BYTES)).decode("ascii")
                    self._keys[name] = value
                    self._save()
        return None if value == _DESTROYED else base64.b64decode(value)

    def slot_for_writing(
        self, key_id: UUID, *, being_id: UUID, subject: str | None, item_id: UUID | None
    ) -> tuple[UUID, bytes] | None:
        """An item's or a subject's key (ADR 0075) from the pool, with the slot the header names;
        None once the key or its being was destroyed."""
        if self.is_destroyed(key_id) or self.is_destroyed(being_id):
            return None
        return self.owned.slot_for_writing(key_id, being_id, subject, item_id)

    def key_of_slot(self, slot: UUID, key_id: UUID, being_id: UUID) -> bytes:
        if self.is_destroyed(key_id) or self.is_destroyed(being_id):
            raise KeyDestroyed(key_id.hex)
        key = self.owned.key_of_slot(slot)
        if key is None:
            with self._lock:
                self._refresh()  # destroyed by another process a moment ago?
            if self._dead(key_id) or self._dead(being_id):
                raise KeyDestroyed(key_id.hex)
            raise KeyStoreError(
                f"key store {self.owned.path} has no key slot {slot.hex}: is it the store of this log?"
            )
        return key

    def key_for_reading(self, key_id: UUID) -> bytes:
        name = key_id.hex
        value = self._keys.get(name)
        if value is None:
            with self._lock:
                self._refresh()
                value = self._keys.get(name)
        if value == _DESTROYED or key_id.int in self.owned.destroyed:
            raise KeyDestroyed(name)
        if value is None:
            owned = self.owned.get(key_id)
            if owned is not None:
                return owned
            raise KeyStoreError(f"key store {self.path} has no key {name}: is it the store of this log?")
        return base64.b64decode(value)

    def destroy(self, key_id: UUID) -> bool:
        with self._exclusive():
            if self._keys.get(key_id.hex) == _DESTROYED:
                return False
            self._keys[key_id.hex] = _DESTROYED
            self._tombstones = True
            self._json_tombstones += 1
            self._save()
        self.owned.delete_being(key_id)  # a being's: its item keys, reserved or with lost tags too
        return True

    def destroy_many(self, key_ids: list[UUID]) -> int:
        """Destroy several keys at once (an item's, a subject's, a being's owned keys). A key of this
        file (a being's) gets its tombstone here; an item's or a subject's key is zeroed in its block
        and its tombstone is a row of the owned-key file, in one transaction (ADR 0094): `keys.json`,
        which every process re-reads whole when it changes, no longer grows by one per item."""
        fresh = 0
        with self._exclusive():
            here = [k for k in key_ids if k.hex in self._keys]
            for key_id in here:
                if self._keys.get(key_id.hex) != _DESTROYED:
                    self._keys[key_id.hex] = _DESTROYED
                    self._tombstones = True
                    self._json_tombstones += 1
                    fresh += 1
            if fresh:
                self._save()
        mine = set(here)
        return fresh + self.owned.delete([k for k in key_ids if k not in mine])

    def close(self) -> None:
        """Give back this process's unused reserved item keys (ADR 0075)."""
        self.owned.close()

    def create_keys(
        self, wanted: Sequence[tuple[UUID, UUID, str | None, UUID | None]], new: Collection[UUID] = ()
    ) -> list[tuple[UUID, bytes] | None]:
        if not wanted:
            return []
        self._recheck()
        keys, destroyed = self._keys, self.owned.destroyed
        checked = self._tombstones or bool(destroyed)
        dead: dict[int, bool] = {}  # per being (by its id's `int`, hashed in C), asked once per save
        live = []
        for w in wanted:
            being_dead = dead.get(w[1].int)
            if being_dead is None:
                being_dead = dead[w[1].int] = keys.get(w[1].hex) == _DESTROYED
            # The key id's `.hex` (Python, ~0.5 µs) only once a key was ever destroyed here.
            live.append(
                not being_dead
                and not (checked and (w[0].int in destroyed or keys.get(w[0].hex) == _DESTROYED))
            )
        if all(live):
            return list(self.owned.create_many(wanted, new))
        taken = iter(self.owned.create_many([w for w, ok in zip(wanted, live, strict=True) if ok], new))
        return [next(taken) if ok else None for ok in live]

    def settle(self) -> None:
        self.owned.settle()

    def owned_keys(
        self, being_id: UUID, *, subject: str | None = None, item_id: UUID | None = None
    ) -> list[UUID]:
        return self.owned.ids_of(being_id, subject, item_id)

    def untagged_slots(self, being_id: UUID) -> list[UUID]:
        return self.owned.untagged(being_id)

    def tag_slot(self, slot: UUID, key_id: UUID, subject: str | None, item_id: UUID | None) -> None:
        self.owned.tag(slot, key_id, subject, item_id)

    def _recheck(self) -> None:
        """Read the file again if this copy is older than `_RECHECK_S` and the file changed."""
        if time.monotonic() - self._checked_at > _RECHECK_S:
            with self._lock:
                self._refresh()

    def is_destroyed(self, key_id: UUID) -> bool:
        self._recheck()
        return self._dead(key_id)

    def destroyed_version(self) -> int:
        self._recheck()
        # Both only grow: tombstones are never taken out of either file.
        return len(self.owned.destroyed) + self._json_tombstones

    def _dead(self, key_id: UUID) -> bool:
        """Destroyed, as this process last saw the two files (see `_recheck`)."""
        return key_id.int in self.owned.destroyed or self._keys.get(key_id.hex) == _DESTROYED

    def create(self) -> None:
        """Write the empty store (a deployment's first start), so that later starts know it exists."""
        with self._exclusive():
            if not self.path.exists():
                self._save()

    def export_keys(self, key_id: UUID) -> Mapping[str, str]:
        with self._lock:
            self._refresh()
        value = self._keys.get(key_id.hex)
        keys = {} if value is None or value == _DESTROYED else {key_id.hex: value}
        for slot, (key, owned_id, subject, item) in self.owned.export(key_id).items():
            if owned_id is None or not self._dead(UUID(hex=owned_id)):
                b64 = base64.b64encode(key).decode("ascii")
                keys[slot] = f"{_OWNED_MARK}{subject or ''}:{item or ''}:{owned_id or ''}:{b64}"
        return keys

    def import_keys(self, keys: Mapping[str, str]) -> int:
        added = 0
        plain = {k: v for k, v in keys.items() if not v.startswith(_OWNED_MARK)}
        for name, value in keys.items():
            if name in plain:
                continue
            subject, item, owned_id, b64 = value[len(_OWNED_MARK) :].rsplit(":", 3)
            if owned_id and self._dead(UUID(hex=owned_id)):
                continue
            owner = _owner_of(keys)
            key = base64.b64decode(b64, validate=True)
            added += self.owned.add(
                UUID(hex=name),
                UUID(hex=owned_id) if owned_id else None,
                owner,
                key,
                subject or None,
                UUID(hex=item) if item else None,
            )
        with self._exclusive():
            for name, value in plain.items():
                if name not in self._keys:
                    base64.b64decode(value, validate=True)
                    self._keys[UUID(hex=name).hex] = value
                    added += 1
            if added:
                self._save()
        return added

    def import_tombstones(self, key_ids: Collection[UUID]) -> int:
        with self._lock:
            self._refresh()
        unknown = [
            k for k in key_ids if not self._dead(k) and k.hex not in self._keys and self.owned.get(k) is None
        ]
        return self.owned.delete(unknown) if unknown else 0


def _owner_of(keys: Mapping[str, str]) -> UUID:
    """The being of an export's owned keys: the one key of the export that is not owned."""
    plain = [k for k, v in keys.items() if not v.startswith(_OWNED_MARK)]
    if len(plain) != 1:
        raise KeyStoreError("an export's item keys come with exactly one being key")
    return UUID(hex=plain[0])


def _signature(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def open_key_store(data_dir: Path) -> LocalKeyStore:
    """The deployment's key store (`<data dir>/keys.json`); refuses one others can read."""
    return LocalKeyStore.in_data_dir(data_dir)
