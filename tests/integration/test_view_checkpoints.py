"""SQLite view databases checkpoint their write-ahead log on a thread of their own (ADR 0016): a
commit never copies the log back into the database itself, and the log does not grow without end."""

from __future__ import annotations

import time
from pathlib import Path

from engram.adapters.views.sqlite_db import INLINE_CHECKPOINT_PAGES, SQLiteViewDatabase


def write_pages(db: SQLiteViewDatabase, commits: int, rows: int = 50) -> None:
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    for _ in range(commits):
        with db.write() as conn:
            conn.executemany("INSERT INTO t (body) VALUES (?)", [("x" * 2000,) for _ in range(rows)])


def wal_frames(path: Path) -> int:
    """Frames in the log, counted from its size (32-byte header, 24-byte frame headers, 4 KiB pages)."""
    wal = path.with_name(path.name + "-wal")
    return max(0, (wal.stat().st_size - 32) // (24 + 4096)) if wal.exists() else 0


def test_commits_leave_the_checkpoint_to_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    db = SQLiteViewDatabase(path, "v")
    db._checkpointer.committed = lambda: None  # type: ignore[method-assign]  # no thread: commits alone
    write_pages(db, 60)  # ~1,600 pages: past SQLite's default automatic checkpoint at 1,000
    # Every page is still in the log: no commit copied any back into the database file.
    assert wal_frames(path) > 1000 and path.stat().st_size < 100_000
    db.close()


def test_writes_without_a_pause_keep_the_log_bounded(tmp_path: Path) -> None:
    """The thread's checkpoints never leave the moment the log restarts in; past
    `INLINE_CHECKPOINT_PAGES` a commit checkpoints itself, and the next write restarts the log."""
    path = tmp_path / "v.sqlite3"
    db = SQLiteViewDatabase(path, "v")
    write_pages(db, 300)  # ~8,000 pages, one commit after another
    assert wal_frames(path) < INLINE_CHECKPOINT_PAGES + 100
    db.close()


def test_the_thread_keeps_the_log_checkpointed(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    db = SQLiteViewDatabase(path, "v")
    for _ in range(5):
        write_pages(db, 30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and db._checkpointer.covered < db._checkpointer.commits:
            time.sleep(0.05)
        assert db._checkpointer.last is not None
        busy, frames, done = db._checkpointer.last
        assert busy == 0 and done == frames > 0
    # The log restarts from its beginning once checkpointed: its file stays near one burst's size.
    assert wal_frames(path) < 1500  # one burst is ~850 frames; five unchecked would be ~4,200
    db.close()
    assert db._checkpointer._thread is None


def test_close_stops_the_thread_and_reads_need_none(tmp_path: Path) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v")
    with db.read() as conn:
        assert conn.query("SELECT 1 AS one") == [{"one": 1}]
    assert db._checkpointer._thread is None
    write_pages(db, 1)
    thread = db._checkpointer._thread
    assert thread is not None and thread.is_alive()
    db.close()
    assert not thread.is_alive()
