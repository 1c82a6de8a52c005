"""What a long-running process keeps in memory stays under its budgets (ADR 0028), checked with real data."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from engram.adapters.views.sqlite_db import HEAP_BUDGET_KIB, SQLiteViewDatabase, limit_sqlite_heap
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings

MIB = 1024 * 1024


@pytest.fixture
def sqlite_used() -> Iterator[Callable[[], int]]:
    """SQLite's heap in this process (the library Python's sqlite3 module uses)."""
    lib = ctypes.CDLL(ctypes.util.find_library("sqlite3"))
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    yield lambda: int(lib.sqlite3_memory_used())
    limit_sqlite_heap(HEAP_BUDGET_KIB)  # the limit is one per process: later tests get the default


def _fill(db: SQLiteViewDatabase, rows: int) -> None:
    with db.write() as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
        conn.executemany("INSERT INTO t (body) VALUES (randomblob(1000))", [()] * rows)


def _read_all(conn: object) -> None:
    [row] = conn.query("SELECT sum(length(body)) AS n FROM t")  # type: ignore[attr-defined]
    assert row["n"] > 0


def test_the_views_page_caches_share_one_budget_per_process(
    tmp_path: Path, sqlite_used: Callable[[], int]
) -> None:
    """Three views, four readers each side by side, each connection allowed a 256 MiB cache: reading a
    ~30 MB file through every connection keeps SQLite's heap under the process's budget, where it
    held a copy of the file per connection before."""
    used = sqlite_used
    budget_mib = 40
    dbs = [
        SQLiteViewDatabase(
            tmp_path / f"v{i}.sqlite3", f"v{i}", cached_connections=4, cache_kib=256 * 1024,
            heap_kib=budget_mib * 1024,
        )
        for i in range(3)
    ]  # fmt: skip
    for db in dbs:
        _fill(db, 30_000)
    with ExitStack() as readers:
        for db in dbs:
            for _ in range(4):  # held open together: each read takes its own cached connection
                _read_all(readers.enter_context(db.read()))
        during = used()
    assert during <= budget_mib * MIB + 4 * MIB, f"SQLite holds {during / MIB:.0f} MiB"
    assert during > budget_mib * MIB // 2  # the caches did fill up to the budget: the reads were real
    for db in dbs:
        db.close()


def test_without_the_budget_each_connection_would_keep_its_own_copy(
    tmp_path: Path, sqlite_used: Callable[[], int]
) -> None:
    """The same reads with a budget larger than the caches: the heap then holds one copy of the file
    per connection, which is what the budget bounds."""
    used = sqlite_used
    db = SQLiteViewDatabase(
        tmp_path / "v.sqlite3", "v", cached_connections=4, cache_kib=256 * 1024, heap_kib=4096 * 1024
    )
    _fill(db, 30_000)
    before = used()
    with ExitStack() as readers:
        for _ in range(4):
            _read_all(readers.enter_context(db.read()))
        during = used()
    assert during - before > 3 * 25 * MIB  # the writer's connection held the file already
    db.close()


def test_the_setting_reaches_the_process(tmp_path: Path, sqlite_used: Callable[[], int]) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none", sqlite_heap_mib=48)
    with bootstrap(settings) as engram:
        engram.views.ensure()
        conn = sqlite3.connect(":memory:")
        try:
            [(limit,)] = conn.execute("PRAGMA soft_heap_limit").fetchall()
        finally:
            conn.close()
    assert limit == 48 * MIB


_ARENAS_CHILD = """
import ctypes, ctypes.util, sys, tempfile, threading
from engram.adapters.process_memory import limit_malloc_arenas
if sys.argv[1] == "limit":
    assert limit_malloc_arenas(2)
def allocate():
    for _ in range(50):
        blocks = [bytearray(500) for _ in range(2000)]
        del blocks
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    fp = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    print(open(out.name).read().count("<heap nr="))
"""


def _arenas_after_eight_threads(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", _ARENAS_CHILD, mode], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


def test_a_server_process_keeps_two_malloc_arenas_whatever_its_threads() -> None:
    """glibc gives each thread that allocates its own arena (up to 8 per core), and each keeps what
    its threads freed; `engram serve` and `engram worker` cap them at two."""
    assert _arenas_after_eight_threads("limit") == 2
    assert _arenas_after_eight_threads("default") > 2
