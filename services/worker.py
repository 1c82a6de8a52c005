"""`engram worker`: keeps every view caught up with the log, continuously.

One thread per projection. Each holds its projection's lock for as long as it runs, so two
workers of one deployment never process the same projection at once (the second waits for the
lock). A failed batch rolls back, is logged with its reason, recorded in the view's status, and
retried with exponential backoff; the other projections keep going.

New events are noticed by polling on SQLite, and by LISTEN/NOTIFY on PostgreSQL plus a periodic
safety pull, because a lost notification must never stall a projection (the listener is the
composition root's: `Engram.listener()`).

A batch that keeps failing at the same position (`ISOLATE_AFTER` times, with backoff) is applied in
smaller ones until the event it fails on is found; that event's being is then held back in the view,
and the other beings' events go on (ADR 0031). Held beings are tried again when due. When it starts,
the worker drops what unfinished rebuilds left behind (their generations, their vector collections).

Maintenance, never in a request or projection thread: one thread builds the HNSW index of a node
collection once enough points are searched by brute force (`VectorMaintenance`, ADR 0009), another
merges a being's full-text index once it grew (`FullTextMaintenance`, ADR 0020); given them, two more
record the expiry of notes due and merge old volatile notes without a TTL (ADR 0048). Each runs only while
this worker holds the lock of the projection it maintains, except the journals' refresh (ADR 0054): the
journals are files of the machine, which every worker writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from engram.domain.errors import DomainError
from engram.projections import engine
from engram.projections.vectors import nodes_alias
from engram.services.errors import StorageFull
from engram.services.fulltext_maintenance import FullTextMaintenance
from engram.services.ports import Listen, Lock
from engram.services.views import Views

log = structlog.get_logger("engram.worker")

MAX_BACKOFF_S = 30.0
SAFETY_PULL_S = 2.0
"""On PostgreSQL, how often the listener wakes the loops without a notification."""

ISOLATE_AFTER = 3
"""Failures of a batch at one position (retried with backoff) before its events are applied in
smaller batches to find the one it fails on: a failure that goes away by itself is left to the backoff."""
# A node collection is optimized (HNSW built) once at least `ENGRAM_VECTOR_OPTIMIZE_MIN_POINTS`
# (default 10k) of its points are outside the index *and* it holds that many more points than after
# its last optimize. Below it, exact search over the unindexed points costs a few ms; Edge leaves
# segments under its indexing threshold (10 MB of vectors, ~6.8k points at 384 dims) unindexed anyway.


class VectorMaintenance:
    """Optimizes the node collections of the active generation that grew enough (ADR 0009).

    `VectorIndex.optimize` blocks its caller for the length of the build (about a minute at 100k
    points on Qdrant Edge, in a child process: the GIL stays free): call `run` from the worker's
    maintenance thread or an admin command only. Engines that index on their own report every
    point as indexed, so nothing is ever due there.
    """

    def __init__(self, views: Views, *, min_new_points: int | None = None) -> None:
        self.views = views
        self.min_new_points = (
            views.settings.vector_optimize_min_points if min_new_points is None else min_new_points
        )
        self._points_after: dict[str, int] = {}  # collection -> its points after its last optimize

    def collections(self) -> list[str]:
        index = self.views.vector_index
        names = [index.resolve_alias(nodes_alias(m)) for m in self.views.read.vector_models("nodes")]
        facts = self.views.fact_search.collections()  # one process owns the index: the facts' too (ADR 0059)
        return [n for n in names if n is not None] + facts

    def due(self) -> list[str]:
        out = []
        for collection in self.collections():
            stats = self.views.vector_index.index_stats(collection)
            grown = stats.points - self._points_after.get(collection, 0)
            if stats.unindexed >= self.min_new_points and grown >= self.min_new_points:
                out.append(collection)
        return out

    def run(self, *, force: bool = False) -> list[dict[str, Any]]:
        """Optimize what is due (every node collection with `force`); one report per collection."""
        index = self.views.vector_index
        done = []
        for collection in self.collections() if force else self.due():
            before = index.index_stats(collection)
            started = time.perf_counter()
            index.optimize(collection)
            after = index.index_stats(collection)
            self._points_after[collection] = after.points
            report = {
                "collection": collection,
                "points": after.points,
                "indexed_before": before.indexed,
                "indexed_after": after.indexed,
                "seconds": round(time.perf_counter() - started, 3),
            }
            log.info("vector collection optimized", **report)
            done.append(report)
        return done


class Wakeup:
    """Shared by all loops: a notification (or the stop flag) ends every loop's wait early."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        with self._cond:
            if self._generation == seen:
                self._cond.wait(timeout)
            return self._generation

    @property
    def generation(self) -> int:
        return self._generation


class Worker:
    def __init__(
        self,
        views: Views,
        *,
        names: Iterable[str] | None = None,
        poll_interval: float = 0.2,
        listen: Listen | None = None,
        on_idle: Callable[[], None] | None = None,
        maintenance: VectorMaintenance | None = None,
        maintenance_interval: float | None = None,
        fulltext: FullTextMaintenance | None = None,
        note_sweep: Callable[..., object] | None = None,
        note_maintenance: Callable[..., object] | None = None,
        note_embedding: Callable[..., object] | None = None,
        fact_embedding: Callable[..., object] | None = None,
        journal_refresh: Callable[..., object] | None = None,
        conversations: Callable[..., object] | None = None,
        extraction: Callable[..., object] | None = None,
        sleep: Callable[..., object] | None = None,
    ) -> None:
        """`maintenance`: default a `VectorMaintenance` when this worker runs the vectors view;
        `maintenance_interval`: default `ENGRAM_VECTOR_MAINTENANCE_INTERVAL_S`; `fulltext`: default a
        `FullTextMaintenance` when it runs the memory view on SQLite; `note_sweep` (`Engram.note_expiry.
        sweep`) and `note_maintenance` (`Engram.note_maintenance.run`): run every
        `ENGRAM_NOTE_SWEEP_INTERVAL_S` and `ENGRAM_NOTE_MAINTENANCE_INTERVAL_S` while this worker runs
        the notes view (ADR 0048); `note_embedding` (`Engram.packing.embed_pending`): every
        `ENGRAM_NOTE_EMBED_INTERVAL_S` (0: never) while this worker runs the notes' search view
        (ADR 0049); `journal_refresh` (`Engram.journals.refresh_due`): every `ENGRAM_JOURNAL_INTERVAL_S`
        (0: never) whatever views this worker runs, for each worker writes its own local folder
        (ADR 0054); `conversations` (`Engram.summaries.worker_round`): closes idle sessions and writes
        the summaries due every `ENGRAM_CONVERSATION_INTERVAL_S` (0: never) while this worker runs the
        conversations view (ADR 0053); `extraction` (`Engram.extraction.worker_round`): extracts facts from
        pending messages every `ENGRAM_EXTRACTION_INTERVAL_S` (0: never) while this worker runs the
        extraction view (ADR 0058); `sleep` (`Engram.sleep.worker_round`): the beings' sleep ticks every
        `ENGRAM_SLEEP_INTERVAL_S` (0: never) while this worker runs the sleep view (ADR 0060); each takes
        `stopping=`."""
        self.views = views
        self.names = list(names or views.names())
        self.poll_interval = poll_interval
        self.listen = listen
        self.on_idle = on_idle
        if maintenance is None and "vectors" in self.names:
            maintenance = VectorMaintenance(views)
        self.maintenance = maintenance
        self.maintenance_interval = (
            views.settings.vector_maintenance_interval_s
            if maintenance_interval is None
            else maintenance_interval
        )
        if fulltext is None and "memory" in self.names and views.dbs["memory"].dialect == "sqlite":
            fulltext = FullTextMaintenance(views)
        self.fulltext = fulltext
        self.note_sweep = note_sweep
        self.note_maintenance = note_maintenance
        self.note_embedding = note_embedding
        self.fact_embedding = fact_embedding  # `Engram.fact_search.embed_pending` (ADR 0059)
        self.journal_refresh = journal_refresh
        self.conversations = conversations
        self.extraction = extraction
        self.sleep = sleep
        self.stop_event = threading.Event()
        self.wakeup = Wakeup()
        self.threads: list[threading.Thread] = []
        self._held: set[str] = set()  # projections whose lock this worker holds
        self._maintainers: list[threading.Thread] = []
        self.stats: dict[str, dict[str, Any]] = {
            n: {"events": 0, "errors": 0, "restarts": 0} for n in self.names
        }

    def start(self) -> None:
        try:
            self.views.collect_garbage(self.names)
        except StorageFull as exc:  # the next start tries again; the views wait for space meanwhile
            log.warning("no space left to drop what unfinished rebuilds left", path=exc.path)
        except Exception:  # never keeps the views from running
            log.error("dropping what unfinished rebuilds left failed", exc_info=True)
        for name in self.names:
            t = threading.Thread(target=self._loop, args=(name,), name=f"projection-{name}", daemon=True)
            t.start()
            self.threads.append(t)
        if self.listen is not None:
            t = threading.Thread(
                target=self.listen, args=(self.wakeup, self.stop_event), name="listen", daemon=True
            )
            t.start()
            self.threads.append(t)
        tasks: list[tuple[str, str | None, Callable[[], object], float]] = []
        if self.maintenance is not None:
            # Only the process that projects the vectors owns them (Qdrant Edge: one process).
            tasks.append(("vector-maintenance", "vectors", self.maintenance.run, self.maintenance_interval))
        if self.fulltext is not None:
            interval = self.views.settings.fulltext_maintenance_interval_s
            fulltext = self.fulltext
            tasks.append(
                (
                    "fulltext-maintenance",
                    "memory",
                    lambda: fulltext.run(stopping=self.stop_event.is_set),
                    interval,
                )
            )
        settings = self.views.settings
        for task, note_run, view, every in (
            ("note-expiry-sweep", self.note_sweep, "notes", settings.note_sweep_interval_s),
            ("note-maintenance", self.note_maintenance, "notes", settings.note_maintenance_interval_s),
            ("note-embedding", self.note_embedding, "note_search", settings.note_embed_interval_s),
            ("fact-embedding", self.fact_embedding, "fact_search", settings.note_embed_interval_s),
            ("conversation-summaries", self.conversations, "conversations", settings.conversation_interval_s),
            ("fact-extraction", self.extraction, "extraction", settings.extraction_interval_s),
            ("sleep-ticks", self.sleep, "sleep", settings.sleep_interval_s),
        ):
            if note_run is not None and view in self.names and every > 0:
                # Reads that view: only the worker that keeps it current runs them.
                tasks.append((task, view, _stoppable(note_run, self.stop_event), every))
        if self.journal_refresh is not None and settings.journal_interval_s > 0:
            # No view lock: the journals are local files, which every worker writes (ADR 0054).
            tasks.append(
                (
                    "journal-refresh",
                    None,
                    _stoppable(self.journal_refresh, self.stop_event),
                    settings.journal_interval_s,
                )
            )
        for name, projection, run, interval in tasks:
            t = threading.Thread(
                target=self._maintain, args=(name, projection, run, interval), name=name, daemon=True
            )
            t.start()
            self._maintainers.append(t)

    def stop(self) -> None:
        self.stop_event.set()
        self.wakeup.notify()
        for t in self.threads:
            t.join(timeout=30)
        for t in self._maintainers:
            # An optimize in flight ends when the views close (the index stops its child process).
            t.join(timeout=1)

    def _maintain(
        self, name: str, projection: str | None, run: Callable[[], object], interval: float
    ) -> None:
        while not self.stop_event.wait(interval):
            if projection is not None and projection not in self._held:
                continue
            try:
                run()
            except StorageFull as exc:  # the next interval tries again
                log.warning(f"{name} skipped: no space left", path=exc.path)
            except Exception as exc:
                if self.stop_event.is_set():
                    return
                log.error(f"{name} failed", reason=f"{type(exc).__name__}: {exc}", exc_info=True)

    def run_forever(self) -> None:
        self.start()
        try:
            while not self.stop_event.wait(1.0):
                if self.on_idle is not None:
                    try:
                        self.on_idle()
                    except DomainError as exc:  # a full disk, views that lag behind it: the next tick
                        log.warning("idle task refused", error=exc.code, reason=exc.message)
        finally:
            self.stop()

    def _acquire(self, name: str) -> Lock | None:
        lock = self.views.lock(name)
        announced = False
        while not self.stop_event.is_set():
            if lock.try_acquire():
                log.info("projection lock acquired", projection=name)
                return lock
            if not announced:
                log.warning(
                    "projection is processed by another worker; waiting for its lock", projection=name
                )
                announced = True
            self.stop_event.wait(1.0)
        return None

    def _schema_upgraded(self, name: str) -> bool:
        """A view whose tables an older Engram built is rebuilt before this worker applies events to
        them (blue-green: readers keep the old generation until the switch); one that a newer Engram
        built is left alone, and this worker does not run it (ADR 0050)."""
        status = engine.status(self.views.dbs[name], self.views.projections[name])
        if status.schema_version > status.code_schema_version:
            log.error(
                "view built by a newer Engram; this worker leaves it alone",
                projection=name,
                stored=status.schema_version,
                code=status.code_schema_version,
            )
            return False
        backoff = 0.5
        while status.needs_rebuild and not self.stop_event.is_set():
            log.warning(
                "view schema changed; rebuilding",
                projection=name,
                stored=status.schema_version,
                code=status.code_schema_version,
            )
            try:
                self.views.rebuild(name)
            except Exception as exc:  # another process's rebuild, a full disk: try again later
                log.error("upgrading the view failed", projection=name, reason=f"{type(exc).__name__}: {exc}")
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
            status = engine.status(self.views.dbs[name], self.views.projections[name])
        return not status.needs_rebuild

    def _rebuilt(self, name: str, diverged: engine.LogDiverged) -> bool:
        try:
            self.views.rebuild_diverged(name, diverged)
        except Exception:
            log.error("rebuilding a view that is ahead of the log failed", projection=name, exc_info=True)
            return False
        return True

    def _loop(self, name: str) -> None:
        lock = self._acquire(name)
        if lock is None:
            return
        self._held.add(name)
        db, projection = self.views.dbs[name], self.views.projections[name]
        if not self._schema_upgraded(name):
            self._held.discard(name)
            lock.release()
            return
        memo = self.views.memos[name]
        backoff = 0.5
        seen = self.wakeup.generation
        failures = 0
        try:
            while not self.stop_event.is_set():
                try:
                    count = engine.process(
                        db,
                        projection,
                        self.views.source,
                        limit=self.views.settings.projection_batch_size,
                        memo=memo,
                        isolating=failures >= ISOLATE_AFTER,
                    )
                except Exception as exc:
                    if isinstance(exc, engine.LogDiverged) and self._rebuilt(name, exc):
                        continue
                    self.stats[name]["errors"] += 1
                    failures += 1
                    if isinstance(exc, StorageFull):  # no bug to trace: waits for space, as for a lock
                        log.warning(
                            "no space left; projection waits",
                            projection=name,
                            path=exc.path,
                            backoff_s=backoff,
                        )
                    else:
                        log.error(
                            "projection failed; restarting after backoff",
                            projection=name,
                            reason=f"{type(exc).__name__}: {exc}",
                            backoff_s=backoff,
                            exc_info=True,
                        )
                    self.stop_event.wait(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    self.stats[name]["restarts"] += 1
                    continue
                if failures:
                    log.info("projection recovered", projection=name)
                    failures = 0
                backoff = 0.5
                self.stats[name]["events"] += count
                if memo.held:
                    self._retry_held(name)
                if count == 0:
                    seen = self.wakeup.wait(seen, self.poll_interval)
        finally:
            self._held.discard(name)
            lock.release()

    def _retry_held(self, name: str) -> None:
        """The held beings whose next try is due, tried again (this worker holds the view's lock)."""
        try:
            self.views.retry_held(name)
        except Exception:
            log.error("trying held events again failed", projection=name, exc_info=True)


def _stoppable(run: Callable[..., object], stop: threading.Event) -> Callable[[], object]:
    return lambda: run(stopping=stop.is_set)
