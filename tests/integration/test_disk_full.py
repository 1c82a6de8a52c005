"""A full disk or database: one clear `storage_full` naming the path, nothing half-written, the same
command succeeds once space returns, and the worker waits instead of dying (issue #7 item 10,
ADR 0030).

The end-to-end tests fill a real file system: a small tmpfs mounted for the test (they skip, with
the reason, where mounting is refused). The mapping of each library's own error is tested without
a mount: SQLite's SQLITE_FULL from `PRAGMA max_page_count`, the kernel's ENOSPC from /dev/full,
psycopg's `DiskFull` (and for real from a PostgreSQL tablespace on a small tmpfs).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
import pytest
from click.testing import CliRunner
from eventsourcing.persistence import OperationalError
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from engram.adapters.cli.main import cli
from engram.adapters.cli.output import EXIT_STORAGE_FULL, exit_code_for
from engram.adapters.http import HttpSettings, create_app
from engram.adapters.http.problems import status_for
from engram.adapters.storage_full import is_storage_full, reported_as_storage_full
from engram.adapters.views.sqlite_db import SQLiteViewDatabase
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.projections.vectors import nodes_alias
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.errors import StorageFull
from engram.services.worker import Worker
from tests.patrol_support import scene
from tests.small_disk import fill, release, small_filesystem
from tests.support import SeededIds, SteppingClock, require_postgres

SCENE = json.dumps({"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]})
NODE_SCENE = validate_scene_object(json.loads(SCENE))


# -- the libraries' own errors, without a mount -----------------------------------------------------


def _sqlite_full(path: Path) -> sqlite3.OperationalError:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (b BLOB)")
    conn.execute("PRAGMA max_page_count = 8")
    try:
        for _ in range(100):
            conn.execute("INSERT INTO t VALUES (?)", [b"x" * 4096])
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("SQLite never filled its page budget")


def test_what_the_libraries_raise_for_a_full_disk_is_storage_full(tmp_path: Path) -> None:
    full = _sqlite_full(tmp_path / "t.sqlite3")
    assert full.sqlite_errorcode == sqlite3.SQLITE_FULL
    wrapped = OperationalError(full)  # as eventsourcing wraps the driver's error
    wrapped.__cause__ = full
    assert is_storage_full(wrapped)
    with open("/dev/full", "wb", buffering=0) as device, pytest.raises(OSError) as enospc:
        device.write(b"x")
    assert is_storage_full(enospc.value)
    assert is_storage_full(psycopg.errors.DiskFull("could not extend file"))
    # A new connection to a database whose tablespace is full, refused at its start.
    assert is_storage_full(
        psycopg.OperationalError("connection failed: … port 5432 failed: FATAL:  could not write init file")
    )
    assert is_storage_full(Exception("Service internal error: No space left on device (os error 28)"))
    not_full: list[BaseException] = [
        sqlite3.OperationalError("no such table: t"),
        psycopg.errors.OutOfMemory("out of memory"),
        psycopg.OperationalError("connection failed: … FATAL:  password authentication failed"),
        PermissionError(13, "denied"),
        ValueError("No space left on device"),  # only an engine's bare Exception is read by its text
    ]
    assert not any(is_storage_full(e) for e in not_full)
    with pytest.raises(StorageFull) as info, reported_as_storage_full(tmp_path / "t.sqlite3"):
        raise full
    assert info.value.path == str(tmp_path / "t.sqlite3") and info.value.code == "storage_full"
    assert info.value.__cause__ is full and "no space left for" in info.value.message
    with pytest.raises(ValueError), reported_as_storage_full("x"):
        raise ValueError("not about space")
    assert status_for(info.value) == 507 and exit_code_for(info.value) == EXIT_STORAGE_FULL == 5


def test_a_full_view_database_rolls_back_and_names_its_file(tmp_path: Path) -> None:
    db = SQLiteViewDatabase(tmp_path / "v.sqlite3", "v")
    try:
        with db.write() as conn:
            conn.execute("CREATE TABLE t (b BLOB)")
            conn.execute("INSERT INTO t VALUES (?)", [b"kept"])
        with db.write() as conn:  # the pool lends this connection again: the budget stays with it
            conn.execute("PRAGMA max_page_count = 16")
        with pytest.raises(StorageFull) as info, db.write() as conn:
            conn.insert_many("t", ["b"], [[b"x" * 4096] for _ in range(100)])
        assert info.value.path == str(tmp_path / "v.sqlite3")
        with db.read() as conn:
            assert conn.query("SELECT b FROM t") == [{"b": b"kept"}]
    finally:
        db.close()


# -- a full disk, for real ---------------------------------------------------------------------------


@contextmanager
def _engram_on(root: Path, **overrides: Any) -> Iterator[Engram]:
    settings = Settings(
        data_dir=root / "data", embedder="hashing", llm="none", **{"vector_disk_reserve_mib": 4, **overrides}
    )
    with bootstrap(settings, clock=SteppingClock(), ids=SeededIds()) as engram:
        yield engram


def _scenes(prefix: str, count: int = 200) -> list[str]:
    return [
        scene(f"{prefix} {i}: planted tomatoes with Mina " + "z" * 1000, "2026-05-02") for i in range(count)
    ]


def test_a_full_disk_refuses_a_command_cleanly_and_the_same_command_succeeds_after(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A batch of notes through the Python API, the CLI and HTTP (a note of a few bytes may still fit
    in the space SQLite's log file took before)."""
    with small_filesystem(48) as root, _engram_on(root) as engram:
        engram.beings.register("Aria")
        engram.views.ensure()
        monkeypatch.setenv("ENGRAM_DATA_DIR", str(root / "data"))
        monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
        run = CliRunner()
        lines = tmp_path / "scenes.jsonl"
        lines.write_text("\n".join(_scenes("cli")) + "\n")
        note = ["note", "Aria", "--file", str(lines)]
        api = [NoteInput(text=t, idempotency_key=f"api-{i}") for i, t in enumerate(_scenes("api"))]
        http = {"notes": [{"text": t, "idempotency_key": f"http-{i}"} for i, t in enumerate(_scenes("http"))]}
        client = TestClient(
            create_app(engram, settings=HttpSettings(), auth=False), raise_server_exceptions=False
        )
        head = engram.store.head()
        fill(root)

        with pytest.raises(StorageFull) as info:
            engram.notes.take_many("Aria", api)
        # The notes' item keys are written before their events (ADR 0075): the being's first item
        # keys create the owned-key file, the first write the full disk refuses, so it is named.
        needed = str(root / "data" / "keys.owned.sqlite3")
        assert info.value.path == needed
        refused = run.invoke(cli, note, catch_exceptions=False)
        assert refused.exit_code == 5 and f"no space left for {needed}" in refused.stderr
        assert "Traceback" not in refused.stderr
        as_json = run.invoke(cli, [*note, "--json"], catch_exceptions=False)
        assert json.loads(as_json.stderr)["error"] == "storage_full"
        answer = client.post("/v1/beings/Aria/notes/batch", json=http)
        assert answer.status_code == 507 and answer.json()["code"] == "storage_full"
        assert answer.json()["details"]["path"] == needed
        assert engram.store.head() == head

        release(root)
        taken = engram.notes.take_many("Aria", api)
        assert taken.position is not None and not any(n.duplicate for n in taken.notes)
        assert run.invoke(cli, note, catch_exceptions=False).exit_code == 0
        assert client.post("/v1/beings/Aria/notes/batch", json=http).status_code == 201
        engram.views.ensure()
        notes = engram.views.read.notes(UUID(taken.notes[0].being_id))
        assert len(notes) == len({n["text"] for n in notes}) == 600
        client.close()


def test_views_on_a_full_disk_keep_their_position_and_catch_up_after() -> None:
    with small_filesystem(48) as root, _engram_on(root) as engram:
        engram.beings.register("Aria")
        engram.views.ensure()
        engram.notes.take_many(
            "Aria", [NoteInput(kind="todo", text=f"todo {i} " + "x" * 2000) for i in range(400)]
        )
        before = {r["name"]: r["position"] for r in engram.views.status()}
        fill(root)
        with pytest.raises(StorageFull) as info:
            engram.views.ensure()
        assert Path(info.value.path).parent == root / "data" / "views"
        release(root)
        head = engram.store.head()
        after = {r["name"]: r["position"] for r in engram.views.status()}
        full = Path(info.value.path).stem
        assert after[full] == before[full] < head  # its batch rolled back
        assert all(after[n] in (before[n], head) for n in after)  # each view all or nothing
        engram.views.ensure()
        status = engram.views.status()
        assert {r["lag"] for r in status} == {0}
        [being] = engram.views.read.beings()
        assert len(engram.views.read.notes(UUID(being["id"]), limit=1000)) == 400


def test_a_patrol_on_a_full_disk_writes_nothing_half_and_finishes_after() -> None:
    """The vector index refuses a write that would leave less than its reserve, and nothing is
    duplicated when the patrol runs again: one node per note, one point per node."""
    with small_filesystem(96) as root, _engram_on(root, vector_disk_reserve_mib=16) as engram:
        engram.beings.register("Aria")
        texts = [scene(f"Watered row {i} of the tomatoes " + "y" * 300, "2026-05-02") for i in range(600)]
        engram.notes.take_many("Aria", [NoteInput(text=t) for t in texts])
        engram.views.ensure()
        fill(root, leave_bytes=12 << 20)  # room for SQL, less than the vector index's reserve
        with pytest.raises(StorageFull) as info:
            engram.patrol("Aria")
        assert info.value.path == str(root / "data" / "vectors")
        release(root)
        engram.patrol("Aria")
        engram.views.ensure()
        being = UUID(engram.views.read.beings()[0]["id"])
        nodes = engram.views.read.nodes(being, limit=10_000)
        assert len(nodes) == len({n["id"] for n in nodes}) == 600
        index = engram.views.vector_index
        assert index.count(nodes_alias(engram.embedder.model_id), being) == 600
        # The same state as a view rebuilt from the log, where no disk was ever full.
        live = {n["id"]: (n["status"], n["cluster_id"]) for n in nodes}
        engram.views.rebuild_all(["memory", "vectors"])
        rebuilt = engram.views.read.nodes(being, limit=10_000)
        assert {n["id"]: (n["status"], n["cluster_id"]) for n in rebuilt} == live
        assert index.count(nodes_alias(engram.embedder.model_id), being) == 600


CHILD = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    import numpy as np
    from engram.adapters.vectors.edge import EdgeVectorIndex
    from engram.projections.vector_index import VectorPoint
    from engram.services.errors import StorageFull
    from tests.small_disk import fill, release

    root = Path(sys.argv[1])
    index = EdgeVectorIndex(root / "vectors", disk_reserve_bytes=8 << 20)
    index.ensure_collection("c", 384)
    rng, being = np.random.default_rng(0), uuid.uuid4()
    written = 0
    try:
        for _ in range(10_000):
            points = [
                VectorPoint(uuid.uuid4(), rng.random(384, dtype=np.float32), {"being_id": str(being), "position": 1})
                for _ in range(500)
            ]
            index.upsert("c", points)
            written += 500
    except StorageFull as exc:
        print("refused", written, exc.path, flush=True)
    release(root)
    filler = fill(root, leave_bytes=(8 << 20) + 4096)  # room for a write, not for a copy of the index
    try:
        index.optimize("c")
    except StorageFull as exc:
        print("optimize refused", exc.path, sorted(p.name for p in (root / "vectors").iterdir()), flush=True)
    index.close()
    """
)


def test_the_vector_index_refuses_a_write_instead_of_dying() -> None:
    """Qdrant Edge writes into memory-mapped files: on a full disk that is a SIGBUS, which kills the
    process (exit 135). In a child process, so that a regression kills the child, not the tests."""
    with small_filesystem(32) as root:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(root)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=Path(__file__).resolve().parents[2],
            check=False,
        )
        assert done.returncode not in (-signal.SIGBUS, 128 + signal.SIGBUS), "killed by SIGBUS"
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.splitlines()
        refused = next(line for line in lines if line.startswith("refused")).split()
        assert int(refused[1]) > 0 and refused[2] == str(root / "vectors")
        optimize = next(line for line in lines if line.startswith("optimize refused"))
        assert str(root / "vectors") in optimize and "optimizing" not in optimize  # no copy was begun


def test_the_worker_waits_for_space_and_resumes() -> None:
    with small_filesystem(48) as root, _engram_on(root) as engram:
        engram.beings.register("Aria")
        engram.views.ensure()
        engram.notes.take_many(
            "Aria", [NoteInput(kind="todo", text=f"todo {i} " + "x" * 2000) for i in range(400)]
        )
        head = engram.store.head()
        fill(root)
        worker = Worker(engram.views, names=["notes"], poll_interval=0.05)
        with capture_logs() as logs:
            worker.start()
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and worker.stats["notes"]["errors"] < 2:
                    time.sleep(0.05)
                waits = [r for r in logs if r["event"] == "no space left; projection waits"]
                assert len(waits) >= 2 and all("exc_info" not in r for r in waits)
                assert waits[0]["path"] == str(root / "data" / "views" / "notes.sqlite3")
                assert [r["backoff_s"] for r in waits[:2]] == [0.5, 1.0]
                assert not [
                    r for r in logs if r["log_level"] == "error" or r["event"].startswith("could not")
                ]
                release(root)
                engram.views.wait_for(head, ["notes"], timeout=30)
            finally:
                worker.stop()
        assert any(r["event"] == "projection recovered" for r in logs)
        [being] = engram.views.read.beings()
        assert len(engram.views.read.notes(UUID(being["id"]), limit=1000)) == 400


def test_a_worker_started_on_a_full_disk_waits_to_start() -> None:
    """A process cannot even open SQLite's files on a full disk (their shared-memory file must grow):
    `engram worker` waits for space instead of exiting, then runs."""
    with small_filesystem(48) as root:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(
            ENGRAM_DATA_DIR=str(root / "data"),
            ENGRAM_EMBEDDER="hashing",
            ENGRAM_LLM="none",
            ENGRAM_LOG_FORMAT="json",
            ENGRAM_LOG_LEVEL="info",
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        )
        with _engram_on(root) as engram:
            engram.beings.register("Aria")
            engram.notes.take_many("Aria", [NoteInput(kind="todo", text=f"todo {i}") for i in range(50)])
            head = engram.store.head()
        fill(root)
        worker = subprocess.Popen(
            [sys.executable, "-c", "from engram.adapters.cli.main import main; main()", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stderr is not None
            first = json.loads(worker.stderr.readline())
            assert first["event"] == "no space left; the worker waits to start"
            # The key store opens first (the item keys destroyed so far are read at start, ADR 0094).
            assert first["path"] == str(root / "data" / "keys.owned.sqlite3")
            release(root)
            deadline = time.monotonic() + 60
            with _engram_on(root) as engram:
                while time.monotonic() < deadline and engram.views.positions(["notes"])["notes"] < head:
                    time.sleep(0.2)
                assert engram.views.positions(["notes"])["notes"] == head
        finally:
            worker.send_signal(signal.SIGINT)
            _, rest = worker.communicate(timeout=60)
        assert worker.returncode == 0 and "Traceback" not in rest


# -- a full PostgreSQL database --------------------------------------------------------------------------


@contextmanager
def _database_on(root: Path) -> Iterator[str]:
    """A database whose tables live in a tablespace on `root` (the server's WAL stays where it is)."""
    base = require_postgres()
    name = f"engram_full_{uuid.uuid4().hex[:8]}"
    location = root / "tablespace"
    location.mkdir()
    subprocess.run(["chown", "postgres", str(location)], check=True)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE TABLESPACE {name} LOCATION '{location}'")
        try:
            admin.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
            try:
                yield base.rsplit("/", 1)[0] + f"/{name}"
            finally:
                admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        finally:
            admin.execute(f"DROP TABLESPACE {name}")


def _fill_database(url: str) -> psycopg.Connection[Any]:
    """Fill the database's tablespace; the connection that did it stays open to empty it again. A new
    connection to a full tablespace may be refused: a backend that must write the database's relation
    cache file first fails with "could not write init file" (seen once in CI)."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE TABLE filler (x text)")
    conn.execute("ALTER TABLE filler ALTER COLUMN x SET STORAGE EXTERNAL")  # stored uncompressed
    for _ in range(10_000):
        try:
            conn.execute("INSERT INTO filler SELECT repeat('x', 4000) FROM generate_series(1, 1000)")
        except psycopg.errors.DiskFull:
            return conn
    conn.close()
    raise AssertionError("the database never filled")


def _empty_database(conn: psycopg.Connection[Any]) -> None:
    with conn:
        conn.execute("DROP TABLE filler")


def test_a_full_postgresql_database_is_storage_full_and_recovers(tmp_path: Path) -> None:
    with small_filesystem(40) as root, _database_on(root) as url:
        settings = Settings(data_dir=tmp_path / "data", database_url=url, embedder="hashing", llm="none")
        with bootstrap(settings, clock=SteppingClock(), ids=SeededIds()) as engram:
            engram.beings.register("Aria")
            engram.views.ensure()
            engram.notes.take("Aria", NoteInput(kind="todo", text="written before"))
            filler = _fill_database(url)
            with pytest.raises(StorageFull) as info:
                engram.views.ensure()
            database = f"PostgreSQL database {url.rsplit('/', 1)[1]} on "
            assert info.value.path.startswith(database) and "@" not in info.value.path
            head = engram.store.head()
            batch = [NoteInput(text=t, idempotency_key=f"k{i}") for i, t in enumerate(_scenes("pg"))]
            with pytest.raises(StorageFull) as info:
                engram.notes.take_many("Aria", batch)
            assert info.value.path.startswith(database) and engram.store.head() == head
            _empty_database(filler)
            engram.notes.take_many("Aria", batch)
            engram.views.ensure()
            [being] = engram.views.read.beings()
            notes = engram.views.read.notes(UUID(being["id"]))
            assert len(notes) == len({n["text"] for n in notes}) == 201


def test_vector_points_written_before_a_refused_commit_are_written_again_once(tmp_path: Path) -> None:
    """The vector view writes the index before its batch's SQL (ADR 0010). With the views' database
    full and the index on another disk, the index takes points of a batch whose commit then fails:
    the batch applied again later rewrites the same points, and the index ends as a rebuild's."""
    with small_filesystem(40) as root, _database_on(root) as url:
        settings = Settings(data_dir=tmp_path / "data", database_url=url, embedder="hashing", llm="none")
        with bootstrap(settings, clock=SteppingClock(), ids=SeededIds()) as engram:
            being = engram.store.get(Being, UUID(engram.beings.register("Aria").being_id))
            engram.views.ensure()
            root_cluster = engram.store.get(Cluster, being.business_root_id)
            rng = random.Random(3)
            nodes = []
            for _ in range(300):
                node = MemoryNode.create(uuid.uuid4(), NODE_SCENE, root_cluster, 0, engram.clock.now())
                vector = [rng.uniform(-1, 1) for _ in range(16)]
                node.embed(Embedding.from_floats("m", vector), engram.clock.now())
                nodes.append(node)
            engram.store.save(*nodes)  # the log only: the views have not seen them
            filler = _fill_database(url)
            position = engram.views.positions(["vectors"])["vectors"]
            with pytest.raises(StorageFull):
                engram.views.ensure(names=["vectors"])
            index, alias = engram.views.vector_index, nodes_alias("m")
            assert engram.views.positions(["vectors"])["vectors"] == position
            assert index.count(alias, being.id) > 0  # the index took the refused batch's points
            _empty_database(filler)
            engram.views.ensure(names=["vectors"])
            ids = [n.id for n in nodes]
            live = {p.id: dict(p.payload) for p in index.retrieve(alias, being.id, ids)}
            assert index.count(alias, being.id) == len(live) == 300
            engram.views.rebuild("vectors")
            rebuilt = {p.id: dict(p.payload) for p in index.retrieve(nodes_alias("m"), being.id, ids)}
            fields = ("status", "cluster_id", "fresh", "pinned", "being_id")
            assert {i: {k: p[k] for k in fields} for i, p in live.items()} == {
                i: {k: p[k] for k in fields} for i, p in rebuilt.items()
            }
