"""Exclusive locks that die with their process: a lock file (SQLite) or a PostgreSQL advisory lock.

They keep two workers (or a worker and an in-process catch-up) from processing the same
projection at once. The operating system releases a flock, and PostgreSQL an advisory lock, when
the holder dies, so a SIGKILLed worker never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Protocol

import psycopg


class Lock(Protocol):
    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._mutex = threading.Lock()

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._fd is not None:
                return False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            # The holder's pid is for people inspecting the file. Rewrite it only when it changed:
            # truncating a file costs ~2 ms on ext4 (a journal commit), and views take these locks on
            # every catch-up, so an unconditional rewrite dominated small catch-ups.
            pid = str(os.getpid()).encode()
            if os.pread(fd, len(pid) + 1, 0) != pid:
                os.ftruncate(fd, 0)
                os.pwrite(fd, pid, 0)
            self._fd = fd
            return True

    def release(self) -> None:
        with self._mutex:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None


class AdvisoryLock:
    """A session-level advisory lock on a connection of its own (the lock lives as long as it)."""

    def __init__(self, conninfo: str, key: str) -> None:
        self.conninfo = conninfo
        self.key = key
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def try_acquire(self) -> bool:
        if self._conn is not None:
            return False
        conn = psycopg.connect(self.conninfo, autocommit=True)
        row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (self.key,)).fetchone()
        if not row or not row[0]:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (self.key,))
            finally:
                self._conn.close()
                self._conn = None
