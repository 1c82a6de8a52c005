"""A full disk or database, recognised in the storage libraries' errors and reported as `StorageFull`
(ADR 0030), and the free space a writer that cannot fail cleanly keeps in reserve.

SQLite says `SQLITE_FULL` ("database or disk is full", or "disk I/O error" when a process opening a
database cannot create its shared-memory file), PostgreSQL `53100 disk_full` (or, refusing a new
connection, "could not write init file"), a plain file
write `ENOSPC` (or `EDQUOT` past a quota), Qdrant Edge's engine "No space left on device" where it
reports the error at all. Where it does not (a write into one of its memory-mapped files), the
kernel kills the process with SIGBUS: `DiskReserve` refuses such a write beforehand instead.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from engram.services.errors import StorageFull

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_PG_INIT_FILE = "could not write init file"
"""PostgreSQL refusing a new connection whose backend must first write the database's relation cache
file into a full tablespace (FATAL, at connect: no SQLSTATE 53100 to read)."""
_ENGINE_MESSAGES = ("No space left on device", "os error 28", "Disk quota exceeded")


_SQLITE_FULL = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_SHMSIZE})
"""SQLITE_FULL, and the "disk I/O error" of a process that opens a database in WAL mode on a full disk:
the shared-memory file it must create and extend first cannot grow (SQLITE_IOERR_SHMSIZE)."""


def _says_full(exc: BaseException) -> bool:
    if isinstance(exc, StorageFull):
        return True
    # Looked up rather than imported: a process that never imported psycopg (the embedded default,
    # a one-shot CLI command) holds no PostgreSQL error to recognise, and skips its import.
    pg_errors = sys.modules.get("psycopg.errors")
    if pg_errors is not None and isinstance(exc, pg_errors.DiskFull):
        return True
    if pg_errors is not None and isinstance(exc, pg_errors.OperationalError) and _PG_INIT_FILE in str(exc):
        return True
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) in _SQLITE_FULL or "database or disk is full" in str(
            exc
        )
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    return type(exc) is Exception and any(m in str(exc) for m in _ENGINE_MESSAGES)  # Qdrant Edge's


def is_storage_full(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from (libraries wrap the driver's), says full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if _says_full(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def postgres_storage(dbname: str, host: str, port: str | int) -> str:
    """How `StorageFull` names a PostgreSQL database: never with its password."""
    return f"PostgreSQL database {dbname} on {host}:{port}"


def deployment_storage(settings: Any) -> str:
    """What a deployment writes to (its PostgreSQL database, or its data directory), for a full disk
    found where the file is not known: a read, by a process that opens a SQLite database in WAL mode,
    needs space too (see `_SQLITE_FULL`)."""
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    if url is None:
        return str(settings.data_dir)
    parsed = urlparse(url)
    return postgres_storage(
        parsed.path.lstrip("/") or "engram", parsed.hostname or "localhost", parsed.port or 5432
    )


@contextmanager
def reported_as_storage_full(path: str | os.PathLike[str]) -> Iterator[None]:
    """Errors of the block that say the storage is full leave it as `StorageFull(path)`."""
    try:
        yield
    except StorageFull:
        raise
    except Exception as exc:
        if is_storage_full(exc):
            raise StorageFull(str(path)) from exc
        raise


MIB = 1024 * 1024
SAFETY_FACTOR = 4
"""A write's estimated size is multiplied by this: Qdrant Edge writes a point to its write-ahead log,
its vector and payload storage and its payload indexes."""


class DiskReserve:
    """Refuses a write unless, after it, the directory's file system keeps `reserve_bytes` free.

    A write's size is an estimate: `require(size)` asks for `reserve_bytes + size * factor` free.
    One `statvfs` a check (~10 µs here) and no cache of it, since another writer of the same disk (a
    view's SQLite file in a rebuild) can take tens of megabytes a second (ADR 0030).
    """

    def __init__(self, path: Path, reserve_bytes: int) -> None:
        self.path = path
        self.reserve_bytes = reserve_bytes

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def require(self, size: int = 0, factor: int = SAFETY_FACTOR) -> None:
        needed = self.reserve_bytes + size * factor
        free = self.free_bytes()
        if free < needed:
            raise StorageFull(
                str(self.path),
                f"{free // MIB} MiB free; a write here must leave {-(-self.reserve_bytes // MIB)} MiB",
            )
