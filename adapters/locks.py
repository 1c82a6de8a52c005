"""Exclusive locks that die with their process: a lock file (SQLite) or a PostgreSQL advisory lock.

They keep two workers (or a worker and an in-process catch-up) from processing the same
projection at once. The operating system releases a flock, and PostgreSQL an advisory lock, when
the holder dies, so a SIGKILLed worker never leaves a stale lock behind. `FileLocks` and
`AdvisoryLocks` hand them out by name (the `services.ports.Locks` port).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg


class FileLocks:
    """Lock files under the data directory: a view's under `views/`, the others under `locks/`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def view_lock(self, view: str, purpose: str) -> FileLock:
        return FileLock(self._view_path(view, purpose))

    def held_view_lock(self, view: str, purpose: str) -> HeldOpenFileLock:
        return HeldOpenFileLock(self._view_path(view, purpose))

    def named_lock(self, key: str) -> FileLock:
        return FileLock(self.data_dir / "locks" / f"{key.replace(':', '-')}.lock")

    def _view_path(self, view: str, purpose: str) -> Path:
        return self.data_dir / "views" / f"{view}.{purpose}.lock"


class AdvisoryLocks:
    """PostgreSQL advisory locks, their keys scoped to the deployment's schema."""

    def __init__(self, conninfo: str, schema: str | None) -> None:
        self.conninfo = conninfo
        self.scope = f"engram:{schema or 'public'}"

    def view_lock(self, view: str, purpose: str) -> AdvisoryLock:
        return AdvisoryLock(self.conninfo, f"{self.scope}:{purpose}:{view}")

    def held_view_lock(self, view: str, purpose: str) -> HeldOpenAdvisoryLock:
        return HeldOpenAdvisoryLock(self.conninfo, f"{self.scope}:{purpose}:{view}")

    def named_lock(self, key: str) -> AdvisoryLock:
        return AdvisoryLock(self.conninfo, f"{self.scope}:{key}")


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
                try:
                    os.pwrite(fd, pid, 0)
                except OSError as exc:  # a full disk: the flock holds all the same (ADR 0030)
                    if exc.errno != errno.ENOSPC:
                        os.close(fd)
                        raise
            self._fd = fd
            return True

    def release(self) -> None:
        with self._mutex:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None


class HeldOpenFileLock:
    """A `FileLock` that keeps its file open between acquisitions: each one costs a `flock`, not a
    mkdir, an open and a close. For a lock taken again and again (a view's catch-up after every write).

    Still exclusive towards other processes and other threads: a flock belongs to the open file, and
    every other `FileLock`/`HeldOpenFileLock` opens its own; within this object a flag under a mutex
    keeps two threads from both "acquiring" the one file. Still dies with the process, which closes the
    file. A child process (fork) opens the file anew, since the inherited file is the parent's lock; a
    lock file replaced on disk is opened anew too. `close()` closes the file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pid = 0
        self._held = False
        self._mutex = threading.Lock()

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._pid != os.getpid():
                # Forked: the inherited file (and any flock on it) is the parent's. Closing our copy of
                # the descriptor releases nothing while the parent keeps its own.
                self._forget()
            if self._held:
                return False
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            pid = str(self._pid).encode()
            if os.pread(fd, len(pid) + 1, 0) != pid:  # see FileLock: rewrite only when it changed
                os.ftruncate(fd, 0)
                try:
                    os.pwrite(fd, pid, 0)
                except OSError as exc:  # a full disk: the flock holds all the same
                    if exc.errno != errno.ENOSPC:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                        raise
            self._held = True
            return True

    def release(self) -> None:
        with self._mutex:
            if self._held and self._fd is not None and self._pid == os.getpid():
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._held = False

    def close(self) -> None:
        with self._mutex:
            self._forget()

    def _open(self) -> int:
        """The open lock file, (re)opened when not yet open or when the path names another file."""
        if self._fd is not None:
            try:
                on_disk, ours = os.stat(self.path), os.fstat(self._fd)
                if (on_disk.st_dev, on_disk.st_ino) == (ours.st_dev, ours.st_ino):
                    return self._fd
            except FileNotFoundError:
                pass
            self._forget()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._pid = os.getpid()
        return self._fd

    def _forget(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._held, self._pid = None, False, os.getpid()


class AdvisoryLock:
    """A session-level advisory lock on a connection of its own (the lock lives as long as it)."""

    def __init__(self, conninfo: str, key: str) -> None:
        self.conninfo = conninfo
        self.key = key
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def try_acquire(self) -> bool:
        if self._conn is not None:
            return False
        import psycopg  # here: a process on SQLite never loads it

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


class HeldOpenAdvisoryLock:
    """An `AdvisoryLock` that keeps its connection between acquisitions: each one costs a query, not a
    connection. `release()` still unlocks; the lock still dies with the process (its connection goes).

    A broken connection is replaced once per try. A child process (fork) connects anew and leaves the
    inherited connection alone (closing it would end the parent's session). `close()` disconnects.
    """

    def __init__(self, conninfo: str, key: str) -> None:
        self.conninfo = conninfo
        self.key = key
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._pid = 0
        self._held = False
        self._mutex = threading.Lock()

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._pid != os.getpid():
                self._conn, self._held, self._pid = None, False, os.getpid()
            if self._held:
                return False
            import psycopg  # here: a process on SQLite never loads it

            try:
                taken = self._try(self._connection())
            except psycopg.OperationalError:
                self._disconnect()  # the server or the network dropped it: one fresh try
                taken = self._try(self._connection())
            self._held = taken
            return taken

    def release(self) -> None:
        with self._mutex:
            if not self._held or self._conn is None or self._pid != os.getpid():
                self._held = False
                return
            self._held = False
            import psycopg

            try:
                self._conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (self.key,))
            except psycopg.Error:
                # A broken connection: its session, and the lock with it, ended or ends as it closes.
                self._disconnect()

    def close(self) -> None:
        with self._mutex:
            if self._pid == os.getpid():
                self._disconnect()
            self._conn, self._held = None, False

    def _try(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (self.key,)).fetchone()
        return bool(row and row[0])

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(self.conninfo, autocommit=True)
        return self._conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
