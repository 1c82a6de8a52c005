"""Checkpoints of a SQLite database's write-ahead log on a thread of its own (ADR 0016).

Used by every SQLite file Engram writes: each view's database, and the event log's.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

CHECKPOINT_PAUSE_S = 1.0
"""The least time between two checkpoints of one database by its checkpointer thread."""

INLINE_CHECKPOINT_PAGES = 4000
"""The log length (pages, 4 KiB each) at which a commit checkpoints after all, as SQLite does at
1,000 by default. The log starts again from its beginning only when a write begins after a complete
checkpoint: under writes without a pause (a catch-up over a large backlog) the thread's checkpoints
never leave such a moment, and the log file would grow without end. The thread keeps sparser writes
(the request path) far below this length."""


class Checkpointer:
    """Copies a database's write-ahead log back into the database on a thread of its own (ADR 0016).

    SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000 pages: that
    commit (a view catching up after a recall, a recall's own reactivations, a note) then copies
    ~4 MB and syncs the file, 10–30 ms instead of ~1. Here a commit only signals; the thread runs a
    PASSIVE checkpoint, which waits for no reader or writer, at most every `CHECKPOINT_PAUSE_S`.
    Commits checkpoint themselves only past `INLINE_CHECKPOINT_PAGES` (set `PRAGMA
    wal_autocheckpoint` to it on every connection that writes). Started by the first commit of a
    process (again after a fork), stopped by `stop`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commits = 0  # signalled so far
        self.covered = 0  # commits whose pages a checkpoint has since found in the log
        self.last: tuple[int, int, int] | None = None  # (busy, log frames, frames checkpointed)
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def committed(self) -> None:
        if self._thread is None or self._pid != os.getpid():
            self._start()
        self.commits += 1  # commits to one file are serial (its write lock)
        self._due.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._due, self._stop = threading.Event(), threading.Event()
            self._thread = threading.Thread(
                target=self._run, name=f"checkpoint-{self.path.stem}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._due.wait()
                if self._stop.is_set():
                    return
                self._due.clear()
                commits = self.commits
                try:
                    [row] = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.last = (int(row[0]), int(row[1]), int(row[2]))
                    self.covered = commits
                except sqlite3.Error as error:  # the next commit signals again
                    log.warning("checkpoint failed", database=self.path.stem, error=str(error))
                if self._stop.wait(CHECKPOINT_PAUSE_S):
                    return
        finally:
            conn.close()

    def stop(self) -> None:
        with self._lock:
            thread = self._thread
            if thread is None or self._pid != os.getpid():
                return
            self._stop.set()
            self._due.set()
            thread.join(timeout=30)
            self._thread = None
