"""A SQLite view lends its connections one transaction at a time (ADR 0023): the first few keep a large
page cache, a lone caller always gets the same one back, and nothing a transaction left behind reaches
the next borrower."""

from __future__ import annotations

import ctypes
import ctypes.util
import sqlite3
import threading
from pathlib import Path
from uuid import UUID

import pytest

from engram.adapters.views.sqlite_db import BULK_CACHE_KIB, SQLiteViewDatabase
from engram.projections import engine
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings


def cache_kib(conn: object) -> int:
    [row] = conn.query("PRAGMA cache_size")  # type: ignore[attr-defined]
    return -int(row["cache_size"])


def connection_of(conn: object) -> sqlite3.Connection:
    return conn._conn  # type: ignore[attr-defined,no-any-return]


def test_a_lone_caller_reads_and_writes_on_one_cached_connection(tmp_path: Path) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=2, cache_kib=64 * 1024)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        first = connection_of(conn)
    for _ in range(3):
        with db.read() as conn:
            assert connection_of(conn) is first and cache_kib(conn) == 64 * 1024
        with db.write() as conn:
            conn.execute("INSERT INTO t DEFAULT VALUES")
            assert connection_of(conn) is first
    assert len(db._pool._all) == 1
    db.close()


def test_side_by_side_readers_get_their_own_connections_and_only_the_first_keep_the_cache(
    tmp_path: Path,
) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=2, cache_kib=64 * 1024)
    with db.write() as conn:  # the file exists, in WAL, before the readers open theirs (as after bootstrap)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    inside, release = threading.Barrier(4), threading.Event()
    seen: list[tuple[int, int]] = []

    def reader() -> None:
        with db.read() as conn:
            seen.append((id(connection_of(conn)), cache_kib(conn)))
            inside.wait(timeout=10)
            release.wait(timeout=10)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    inside.wait(timeout=10)  # all three hold a read transaction at once
    release.set()
    for t in threads:
        t.join(timeout=10)
    assert len({c for c, _ in seen}) == 3  # the writer's connection, and two opened side by side
    assert sorted(kib for _, kib in seen) == [2000, 64 * 1024, 64 * 1024]  # SQLite's default: 2,000 KiB
    # Idle again: a borrower gets a cached connection before the other one.
    with db.read() as conn:
        assert cache_kib(conn) == 64 * 1024
    db.close()
    assert db._pool._all == []


def test_a_connection_left_in_a_transaction_is_rolled_back_before_it_is_lent_again(tmp_path: Path) -> None:
    """As after a COMMIT that failed (SQLITE_BUSY, say): `write` re-raises, and the pool takes the
    connection back still inside the transaction."""
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v")
    with db.write() as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    raw = db._pool.take()
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO t DEFAULT VALUES")
    db._pool.give(raw)
    with db.write() as conn:  # would fail with "cannot start a transaction within a transaction"
        assert connection_of(conn) is raw
        conn.execute("INSERT INTO t DEFAULT VALUES")
    with db.read() as conn:
        assert conn.query("SELECT count(*) AS n FROM t") == [{"n": 1}]  # the abandoned insert is gone
    db.close()


def test_a_bulk_block_runs_on_a_connection_of_its_own_with_the_bulk_cache_then_closes_it(
    tmp_path: Path,
) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=1, cache_kib=1024)
    with db.read() as conn:
        pooled = connection_of(conn)
    with db.bulk():
        with db.write() as conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            pinned = connection_of(conn)
            assert pinned is not pooled and cache_kib(conn) == BULK_CACHE_KIB
        with db.read() as conn:
            assert connection_of(conn) is pinned
    with db.read() as conn:
        assert connection_of(conn) is pooled and cache_kib(conn) == 1024
        assert conn.query("SELECT count(*) AS n FROM t") == [{"n": 0}]  # the block's table, committed
    with pytest.raises(sqlite3.ProgrammingError):
        pinned.execute("SELECT 1")
    assert db._pool._all == [pooled]
    db.close()


def test_a_bulk_block_leaves_its_pages_with_its_connection(tmp_path: Path) -> None:
    """What a bulk block wrote does not stay in the process: the pooled connections keep only what
    reads brought in (a pooled connection that had written a rebuild served reads slower, ADR 0023)."""
    sqlite_lib = ctypes.CDLL(ctypes.util.find_library("sqlite3"))
    sqlite_lib.sqlite3_memory_used.restype = ctypes.c_int64
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=1, cache_kib=256 * 1024)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    before = sqlite_lib.sqlite3_memory_used()
    with db.bulk():
        for _ in range(4):
            with db.write() as conn:
                conn.executemany("INSERT INTO t (body) VALUES (randomblob(1000))", [()] * 5000)
        during = sqlite_lib.sqlite3_memory_used()
    after = sqlite_lib.sqlite3_memory_used()
    assert during - before > 15_000_000  # the ~20 MB written sit in the block's page cache
    assert after - before < 2_000_000
    with db.read() as conn:
        assert conn.query("SELECT count(*) AS n FROM t") == [{"n": 20_000}]
    db.close()


def test_settings_size_the_views_connections(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        embedder="hashing",
        llm="none",
        view_cache_mib=8,
        view_cached_connections=1,
    )
    with bootstrap(settings) as engram:
        db = engram.views.dbs["memory"]
        assert isinstance(db, SQLiteViewDatabase)
        with db.read() as conn:
            assert cache_kib(conn) == 8 * 1024


def test_a_bulk_block_inside_another_keeps_the_outer_pin(tmp_path: Path) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=1, cache_kib=1024)
    with db.bulk():
        with db.read() as conn:
            pinned = connection_of(conn)
        with db.bulk(), db.read() as conn:
            assert connection_of(conn) is pinned
        with db.read() as conn:
            assert connection_of(conn) is pinned and cache_kib(conn) == BULK_CACHE_KIB
    with db.read() as conn:
        assert connection_of(conn) is not pinned and cache_kib(conn) == 1024
    db.close()


def test_a_connection_that_failed_to_open_leaves_its_cache_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v", cached_connections=1, cache_kib=1024)
    opened = db._pool._open

    def fail() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(db._pool, "_open", fail)
    with pytest.raises(sqlite3.OperationalError), db.read():
        pass
    monkeypatch.setattr(db._pool, "_open", opened)
    with db.read() as conn:
        assert cache_kib(conn) == 1024
    db.close()


def _open_side_by_side(db: SQLiteViewDatabase, threads: int) -> tuple[list[str], list[BaseException]]:
    """`threads` threads start a read on `db` at the same moment; each one's journal mode, or error."""
    start = threading.Barrier(threads)
    modes: list[str] = []
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            start.wait(timeout=10)
            with db.read() as conn:
                modes.append(conn.query("PRAGMA journal_mode")[0]["journal_mode"])
        except BaseException as exc:
            errors.append(exc)

    running = [threading.Thread(target=opener) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join(timeout=30)
    return modes, errors


def test_connections_opening_side_by_side_on_a_new_file_all_get_it_in_wal(tmp_path: Path) -> None:
    """Twelve threads open a new file at once, sixty times: without the retry of the switch to WAL,
    each of four runs of this test failed ("database is locked"); the full suite had hit it too."""
    for round_ in range(60):
        db = SQLiteViewDatabase(tmp_path / f"v{round_}.sqlite3", "v", cached_connections=0)
        modes, errors = _open_side_by_side(db, 12)
        db.close()
        assert errors == [] and modes == ["wal"] * 12


def test_a_catch_up_of_a_backlog_writes_all_but_its_first_batch_in_a_bulk_block(tmp_path: Path) -> None:
    """A view far behind (more than `BULK_BACKLOG_BATCHES` batches) catches up like a rebuild writes,
    on a connection of its own; one a few batches behind stays on the pooled connection."""
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    with bootstrap(settings) as engram:
        being_id = UUID(engram.beings.register("Aria").being_id)
        db = engram.views.dbs["notes"]
        assert isinstance(db, SQLiteViewDatabase)
        notes = engram.views.projections["notes"]
        pinned: list[bool] = []

        def progress(count: int) -> None:
            pinned.append(getattr(db._local, "pinned", None) is not None)

        def note(count: int) -> None:
            for i in range(count):
                engram.notes.take("Aria", NoteInput(kind="todo", text=f"todo {i}"))

        note(120)
        applied = engine.catch_up(db, notes, engram.views.source, limit=5, progress=progress)
        assert applied >= 120
        assert len(pinned) >= 20 and pinned[0] is False and all(pinned[1:])
        assert getattr(db._local, "pinned", None) is None  # the block ended with the catch-up
        assert len(engram.views.read.notes(being_id)) == 120

        pinned.clear()
        note(12)  # about three batches behind
        engine.catch_up(db, notes, engram.views.source, limit=5, progress=progress)
        assert len(pinned) >= 3 and not any(pinned)
        assert len(engram.views.read.notes(being_id)) == 132
