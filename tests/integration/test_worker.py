"""The worker and blue-green rebuilds under load: what `engram worker` and `engram projections` promise.

- a rebuild under concurrent writes and reads: reads never fail nor see a half-built view, and after
  the switch the view equals a fresh rebuild (no event lost around the switch);
- `Views.status()` (behind `engram projections status`) reports position, head, lag and last error;
- a failing projection is retried with growing backoff, its error recorded, and it recovers;
- two workers of one deployment never process the same projection at once; the second takes over;
- the worker wakes on PostgreSQL's NOTIFY, and its safety pull catches up when a notification is lost
  (on SQLite, polling does both).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest
from click.testing import CliRunner
from structlog.testing import capture_logs

from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.projections.engine import Batch, Projection, handles
from engram.projections.tables import TableSpec
from engram.projections.vectors import centroids_alias, nodes_alias
from engram.services import worker as worker_module
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.views import Views
from engram.services.worker import Worker

MODEL = "m"
DIM = 16
SCENE = validate_scene_object({"action": "walked by the river", "actors": ["me"], "when": ["2026-04-01"]})


# -- helpers -----------------------------------------------------------------------------------------


def _embedded_nodes(e: Engram, cluster: Cluster, count: int, rng: random.Random) -> list[MemoryNode]:
    nodes = []
    for _ in range(count):
        node = MemoryNode.create(uuid4(), SCENE, cluster, 0, e.clock.now())
        node.embed(Embedding.from_floats(MODEL, [rng.uniform(-1, 1) for _ in range(DIM)]), e.clock.now())
        nodes.append(node)
    return nodes


def _register(e: Engram, name: str = "Aria") -> tuple[UUID, Cluster]:
    registered = e.beings.register(name)
    return UUID(registered.being_id), e.store.get(Cluster, UUID(registered.roots["Business"]))


def _rows(views: Views, name: str) -> dict[str, dict[str, Any]]:
    """Every row of the active generation of one view, by table and key."""
    db, projection = views.dbs[name], views.projections[name]
    out: dict[str, Any] = {}
    with db.read() as conn:
        for logical, physical in engine.read_tables(conn, db, projection).items():
            spec = next(s for s in projection.tables if s.name == logical)
            out[logical] = {r[spec.key]: spec.normalise(r) for r in conn.query(f"SELECT * FROM {physical}")}
    return out


def _points(views: Views, being_id: UUID, node_ids: list[UUID], cluster_ids: list[UUID]) -> dict[str, Any]:
    """Payloads and vectors of the node and centroid points behind the aliases; payloads without
    `position`, which depends on where batches cut the log (ADR 0010)."""
    index = views.vector_index
    out: dict[str, Any] = {}
    for kind, alias, ids in (
        ("nodes", nodes_alias(MODEL), node_ids),
        ("centroids", centroids_alias(MODEL), cluster_ids),
    ):
        found = index.retrieve(alias, being_id, ids, with_vectors=True)
        assert index.count(alias) == len(found)
        out[kind] = {
            str(p.id): (
                {k: v for k, v in p.payload.items() if k != "position"},
                np.round(np.asarray(p.vector, dtype=np.float64), 5).tolist(),
            )
            for p in found
        }
    return out


def _until(predicate: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def _status(views: Views, name: str) -> dict[str, Any]:
    return next(r for r in views.status() if r["name"] == name)


@contextmanager
def _running(worker: Worker) -> Iterator[Worker]:
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


# -- blue-green under load -----------------------------------------------------------------------------


def test_rebuild_under_writes_and_reads_loses_no_event(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(projection_batch_size=40)  # many batches: the writer interleaves with them
    e = bootstrap(settings)
    writer_e = bootstrap(settings)  # another connection to the log, as another process would have
    rng = random.Random(7)
    try:
        being_id, root = _register(e)
        node_ids: list[UUID] = []
        for _ in range(6):
            batch = _embedded_nodes(e, root, 100, rng)
            e.store.save(*batch)
            node_ids += [n.id for n in batch]
        for i in range(150):
            e.notes.take("Aria", NoteInput(kind="todo", text=f"todo {i}"))
        initial_nodes, initial_notes = len(node_ids), 150
        views = e.views
        views.ensure()
        probe = np.asarray([rng.uniform(-1, 1) for _ in range(DIM)], dtype=np.float32)

        stop_writing, stop_reading = threading.Event(), threading.Event()
        failures: list[BaseException] = []
        seen: dict[str, list[int]] = defaultdict(list)
        written = {"notes": 0, "nodes": 0}

        def write() -> None:
            wrng = random.Random(11)
            cluster = writer_e.store.get(Cluster, root.id)
            try:
                while not stop_writing.is_set():
                    batch = _embedded_nodes(writer_e, cluster, 3, wrng)
                    writer_e.store.save(*batch)
                    node_ids.extend(n.id for n in batch)
                    written["nodes"] += len(batch)
                    node = writer_e.store.get(MemoryNode, wrng.choice(node_ids))
                    node.unpin(writer_e.clock.now()) if node.pinned else node.pin(writer_e.clock.now())
                    writer_e.store.save(node)
                    writer_e.notes.take("Aria", NoteInput(kind="todo", text="written under load"))
                    written["notes"] += 1
                    time.sleep(0.002)
            except BaseException as exc:
                failures.append(exc)

        def read() -> None:
            while not stop_reading.is_set():
                try:
                    seen["nodes"].append(len(views.read.nodes(being_id)))
                    seen["notes"].append(len(views.read.notes(being_id)))
                    seen["search"].append(len(views.vectors.similar_nodes(being_id, MODEL, probe, 1000)))
                    seen["clusters"].append(len(views.read.clusters(being_id)))
                except BaseException as exc:
                    failures.append(exc)

        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        with _running(Worker(views, poll_interval=0.05)):
            for t in threads:
                t.start()
            try:
                for name in ("memory", "notes", "vectors"):
                    assert views.rebuild(name) == 2
                time.sleep(0.3)  # writes go on after the switch
            finally:
                stop_writing.set()
                threads[0].join(timeout=30)
                head = e.store.head()
                views.wait_for(head, timeout=60)
                stop_reading.set()
                threads[1].join(timeout=30)
        assert failures == []
        assert written["nodes"] > 0 and written["notes"] > 0
        # Blue-green: readers saw the old generation until the switch, never an empty or partial view.
        assert len(seen["nodes"]) > 10 and min(seen["nodes"]) >= initial_nodes
        assert min(seen["search"]) >= initial_nodes and min(seen["notes"]) >= initial_notes
        assert min(seen["clusters"]) == 2

        assert views.positions() == dict.fromkeys(views.names(), head)
        assert len(views.read.nodes(being_id)) == len(node_ids)
        assert len(views.read.notes(being_id)) == initial_notes + written["notes"]
        clusters = [root.id]
        live = {n: _rows(views, n) for n in ("memory", "notes", "vectors")}
        live_points = _points(views, being_id, node_ids, clusters)
        assert len(live_points["nodes"]) == len(node_ids)
        assert live_points["centroids"][str(root.id)][0]["count"] == len(node_ids)

        for name in ("memory", "notes", "vectors"):
            assert views.rebuild(name) == 3
        assert {n: _rows(views, n) for n in ("memory", "notes", "vectors")} == live
        assert _points(views, being_id, node_ids, clusters) == live_points
    finally:
        writer_e.close()
        e.close()


# -- status --------------------------------------------------------------------------------------------


def test_status_reports_position_head_lag_and_last_error(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings()
    with bootstrap(settings) as e:
        _register(e)
        for i in range(5):
            e.notes.take("Aria", NoteInput(kind="todo", text=f"todo {i}"))
        head = e.store.head()
        views = e.views
        rows = {r["name"]: r for r in views.status()}
        assert set(rows) == set(views.names())
        assert all(
            (r["head"], r["position"], r["lag"], r["last_error"]) == (head, 0, head, None)
            for r in rows.values()
        )

        views.ensure(names=["notes"])
        engine.record_error(views.dbs["memory"], views.projections["memory"], "RuntimeError: boom")
        rows = {r["name"]: r for r in views.status()}
        assert (rows["notes"]["position"], rows["notes"]["lag"]) == (head, 0)
        assert (rows["beings"]["position"], rows["beings"]["lag"]) == (0, head)
        assert rows["memory"]["last_error"] == "RuntimeError: boom" and rows["memory"]["last_error_at"]
        assert rows["notes"]["last_error"] is None

    # `engram projections status --json` prints the same rows.
    from engram.adapters.cli import main as cli_main

    monkeypatch.setattr(cli_main, "bootstrap", lambda *_, **__: bootstrap(settings))
    result = CliRunner().invoke(cli_main.cli, ["projections", "status", "--json"])
    assert result.exit_code == 0, result.output
    printed = {r["name"]: r for r in json.loads(result.stdout)}
    assert (printed["notes"]["position"], printed["notes"]["head"], printed["notes"]["lag"]) == (
        head,
        head,
        0,
    )
    assert (printed["memory"]["lag"], printed["memory"]["last_error"]) == (head, "RuntimeError: boom")


# -- failure, backoff, recovery ------------------------------------------------------------------------

SEEN = TableSpec(name="seen", columns={"id": "id", "applied": "int"})


class Flaky(Projection):
    """Counts each note it applies; its handler raises in the first `failures` batches."""

    name = "flaky"
    tables = (SEEN,)

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[float] = []

    def apply(self, batch: Batch, events: Sequence[tuple[int, Any]]) -> None:
        if events:
            self.attempts.append(time.monotonic())
        super().apply(batch, events)

    @handles(Note.Noted)
    def _noted(self, batch: Batch, e: Note.Noted) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("boom")
        row = batch.seen.get(batch.conn, str(e.originator_id)) or {"id": str(e.originator_id), "applied": 0}
        row["applied"] += 1
        batch.seen.put(row)


def test_failing_projection_is_retried_with_backoff_records_its_error_and_recovers(
    engram: Engram,
) -> None:
    _register(engram)
    for i in range(10):
        engram.notes.take("Aria", NoteInput(kind="todo", text=f"todo {i}"))
    head = engram.store.head()
    flaky = Flaky(failures=3)
    views = engram.open_views(extra=[flaky])
    try:
        worker = Worker(views, names=["flaky", "notes"], poll_interval=0.05)
        with capture_logs() as logs, _running(worker):
            assert _until(lambda: _status(views, "flaky")["last_error"] is not None, 10)
            row = _status(views, "flaky")
            assert row["last_error"] == "RuntimeError: boom" and row["last_error_at"]
            assert row["position"] == 0 and row["lag"] == head
            # The other projections keep going meanwhile.
            views.wait_for(head, ["notes"], timeout=5)
            assert worker.stats["flaky"]["errors"] < 3
            views.wait_for(head, ["flaky"], timeout=20)
            assert _until(lambda: _status(views, "flaky")["last_error"] is None, 5)
        assert worker.stats["flaky"]["errors"] == 3 and worker.stats["flaky"]["restarts"] == 3
        failed = [
            r for r in logs if r["event"].startswith("projection failed") and r["projection"] == "flaky"
        ]
        backoffs = [r["backoff_s"] for r in failed]
        assert backoffs == [0.5, 1.0, 2.0] and {r["reason"] for r in failed} == {"RuntimeError: boom"}
        assert any(r["event"] == "projection recovered" and r["projection"] == "flaky" for r in logs)
        # Each retry came after its backoff: 0.5 s, then 1 s, then 2 s.
        gaps = np.diff(flaky.attempts).tolist()
        assert len(gaps) == 3, flaky.attempts
        assert all(gap >= 0.95 * backoff for gap, backoff in zip(gaps, backoffs, strict=True)), gaps
        rows = _rows(views, "flaky")["seen"]
        assert len(rows) == 10 and {r["applied"] for r in rows.values()} == {1}, (
            "rolled-back batches left nothing"
        )
    finally:
        views.close()


# -- two workers ---------------------------------------------------------------------------------------


def test_two_workers_never_process_the_same_projection_at_once(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings()
    a, b = bootstrap(settings), bootstrap(settings)  # two worker processes of one deployment, in one process
    a_open = True
    rng = random.Random(3)
    in_flight: dict[str, int] = defaultdict(int)
    overlap: list[str] = []
    owners: dict[str, set[int]] = defaultdict(set)
    guard = threading.Lock()
    process = engine.process

    def watched(db: Any, projection: Projection, source: Any, **kw: Any) -> int:
        with guard:
            in_flight[projection.name] += 1
            if in_flight[projection.name] > 1:
                overlap.append(projection.name)
            owners[projection.name].add(id(source))
        try:
            time.sleep(0.002)  # widen the window a second processor would fall into
            return process(db, projection, source, **kw)
        finally:
            with guard:
                in_flight[projection.name] -= 1

    def handled(name: str) -> int:
        return len(b.store.notifications(1, 100_000, b.views.projections[name].topics))

    monkeypatch.setattr(worker_module.engine, "process", watched)
    try:
        being_id, root = _register(a)
        names = a.views.names()
        wa, wb = Worker(a.views, poll_interval=0.02), Worker(b.views, poll_interval=0.02)
        wa.start()
        wb.start()  # both race for every lock
        try:
            for _ in range(20):
                a.store.save(*_embedded_nodes(a, root, 5, rng))
                a.notes.take("Aria", NoteInput(kind="todo", text="a todo"))
                time.sleep(0.01)
            a.views.wait_for(a.store.head(), timeout=30)
            # Every projection lock is held by one of the workers, and only that one processed it.
            for name in names:
                lock = a.views.lock(name)
                taken = lock.try_acquire()
                if taken:
                    lock.release()
                assert not taken, name
            assert overlap == []
            assert set(owners) == set(names) and all(len(owners[n]) == 1 for n in names), owners
            for name in names:
                counts = (wa.stats[name]["events"], wb.stats[name]["events"])
                assert sum(counts) == handled(name) and 0 in counts, (name, counts)
            a_owned = [n for n in names if owners[n] == {id(a.store)}]
            assert a_owned, "the first worker started first and took some locks"

            # The first worker stops (its process goes away): the second takes its projections over.
            wa.stop()
            a.close()
            a_open = False
            owners.clear()
            b.store.save(*_embedded_nodes(b, b.store.get(Cluster, root.id), 5, rng))
            b.notes.take("Aria", NoteInput(kind="todo", text="after the failover"))
            b.views.wait_for(b.store.head(), timeout=30)
            assert _until(lambda: set(owners) == set(names), 5)
            assert all(owners[n] == {id(b.store)} for n in names), owners
            assert overlap == []
            for name in names:
                assert wa.stats[name]["events"] + wb.stats[name]["events"] == handled(name), name
            assert len(b.views.read.nodes(being_id)) == 105
        finally:
            wb.stop()
            wa.stop()
    finally:
        if a_open:
            a.close()
        b.close()


# -- waking up: NOTIFY, and the safety pull when a notification is lost ---------------------------------


def _latencies(e: Engram, views: Views, count: int, rng: random.Random) -> list[float]:
    """Seconds from each note's commit to the notes view reaching it, notes written at random moments."""
    out = []
    for i in range(count):
        time.sleep(rng.uniform(0.05, 0.6))
        position = e.notes.take("Aria", NoteInput(kind="todo", text=f"wake {i}")).position
        assert position is not None
        committed = time.monotonic()
        assert _until(lambda p=position: views.positions(["notes"])["notes"] >= p, 10, step=0.002)
        out.append(time.monotonic() - committed)
    return out


def test_worker_wakes_on_a_new_event_within_a_bound(engram: Engram) -> None:
    _register(engram)
    views = engram.views
    views.ensure()
    listen = engram.listener()
    if listen is not None:
        # PostgreSQL: only NOTIFY can wake the worker this fast; the poll and the safety pull are slower.
        worker = Worker(views, names=["notes"], poll_interval=30.0, listen=listen)
    else:
        worker = Worker(views, names=["notes"], poll_interval=engram.settings.worker_poll_interval_s)
    with _running(worker):
        time.sleep(0.2)  # the listener is connected
        latencies = _latencies(engram, views, 6, random.Random(5))
    assert max(latencies) < 0.6, latencies


def test_safety_pull_catches_up_when_notifications_are_lost(engram: Engram) -> None:
    _register(engram)
    views = engram.views
    views.ensure()
    listen = engram.listener("engram_lost_notifications")
    if listen is not None:
        # LISTEN on a channel nobody notifies: every notification is lost; the poll is too slow to help.
        worker = Worker(views, names=["notes"], poll_interval=60.0, listen=listen)
        bound = worker_module.SAFETY_PULL_S + 1.0
    else:

        def never(wakeup: worker_module.Wakeup, stop: threading.Event) -> None:
            stop.wait()

        worker = Worker(views, names=["notes"], poll_interval=0.5, listen=never)
        bound = 0.5 + 1.0
    with _running(worker):
        time.sleep(0.2)
        latencies = _latencies(engram, views, 3, random.Random(6))
    assert max(latencies) < bound, latencies
    assert views.positions(["notes"])["notes"] == engram.store.head()
