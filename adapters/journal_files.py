"""The journals on disk (ADR 0054): `<root>/<being folder>/<name>`, each file replaced atomically.

A write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the
old file (`os.replace`, atomic on POSIX and Windows within one file system); the folder is fsynced
after, so the rename survives a crash. A reader therefore sees the old file or the new one, never a
part; a crash leaves at most a stray `.*.tmp` file, which the next write of that name replaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from engram.services.errors import StorageFull


def _component(value: str, what: str) -> str:
    """A single path component: what the service passes, checked again so that no caller's value can
    ever name a path outside the root."""
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"a journal {what} must be one path component, not {value!r}")
    return value


class JournalFolder:
    """`JournalFiles` on a local folder (`ENGRAM_JOURNAL_DIR`, default `<data dir>/journals`)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def location(self, folder: str) -> str:
        return str(self.root / _component(folder, "folder"))

    def read(self, folder: str, name: str) -> str | None:
        path = self.root / _component(folder, "folder") / _component(name, "file name")
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def remove(self, folder: str) -> int:
        """Delete the folder and its files (erasure, ADR 0073); returns how many files went."""
        where = self.root / _component(folder, "folder")
        if not where.is_dir():
            return 0
        files = [p for p in where.rglob("*") if p.is_file()]
        shutil.rmtree(where)
        return len(files)

    def write(self, folder: str, name: str, text: str) -> None:
        where = self.root / _component(folder, "folder")
        target = where / _component(name, "file name")
        try:
            where.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=where)
            try:
                os.chmod(temp, _mode(target))  # mkstemp's 0600 would hide the journals from their readers
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text.encode("utf-8"))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(temp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            _sync_folder(where)
        except OSError as exc:
            if exc.errno == 28:  # ENOSPC: the same answer as a full disk anywhere else (ADR 0030)
                raise StorageFull(str(where)) from exc
            raise


def _mode(target: Path) -> int:
    """The file's permissions: those of the file it replaces (an operator may have changed them),
    else readable by all (`rw-r--r--`), as journals meant for inspection are."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644


def _sync_folder(folder: Path) -> None:
    """fsync the folder, so that the rename is on disk (not possible on Windows: skipped there)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
