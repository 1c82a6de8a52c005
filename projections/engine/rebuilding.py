"""Blue-green rebuild: a view's next generation filled from position 0 while the active one serves,
then switched to in the transaction that applies the last events; and the cleaning up after it.

Three phases. Bulk: batches of `bulk_limit` events into tables without secondary indexes, their rows
kept in memory from batch to batch (only the rebuild writes them), read and decoded by a thread one
batch ahead. Then the indexes are built over the loaded tables. Last stretch: batches of the view's
usual size up to the head, the last ones and the switch in one transaction. Every batch commits its
rows with the generation's tracking position, as live processing does; a rebuild that dies leaves a
generation that never serves and that the next rebuild (or `collect_garbage`) drops. Views that
handle the same events (memory and vectors) share one pass over the log (ADR 0011).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import structlog

from engram.projections.engine import tracking
from engram.projections.engine.batches import (
    DEFAULT_BATCH,
    Step,
    isolate,
    may_be_the_events,
    next_step,
    run_batch,
    write_step,
)
from engram.projections.engine.collector import fewer_gc_passes
from engram.projections.engine.contract import Projection
from engram.projections.engine.rows import RowCache
from engram.projections.engine.source import EventSource, event_key
from engram.projections.engine.tracking import LogDiverged, ViewMemo
from engram.projections.sql import ViewDatabase

log = structlog.get_logger("engram.projections")

REBUILD_BATCH = 10_000
"""Events per transaction while a rebuild fills a generation that nobody reads yet. Large batches
write a row once for many events (a node is created, embedded and changed within one patrol), and
commit, checkpoint and round-trip less; the last events before the switch go in batches of the
view's usual size."""

REBUILD_CACHE_ROWS = 250_000
"""Rows per table a rebuild keeps in memory between batches (a few hundred MB at most); past it,
later batches read rows back from the table like live processing does."""


def rebuild(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
    bulk_limit: int = REBUILD_BATCH,
) -> int:
    """Fill a new generation from position 0, then switch to it atomically; returns the new
    generation. Reads keep using the active generation until the switch."""
    build = _Build.start(db, projection, source)
    step = _bulk_step(projection, limit, bulk_limit)
    with db.bulk(), fewer_gc_passes(), _Reader(source, projection.topics, step, limit) as reader:
        for events, position, head in reader:
            build.apply(events, position)
            _trim(build.caches)
            if progress:
                progress(position, head)
        build.index()
    return build.finish(source, limit, progress)


def rebuild_many(
    views: Sequence[tuple[ViewDatabase, Projection]],
    source: EventSource,
    *,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[str, int, int], None] | None = None,
    bulk_limit: int = REBUILD_BATCH,
) -> dict[str, int]:
    """`rebuild` of several views; views that handle some of the same topics share one pass.

    Sharing saves decoding the events that several views handle (the memory and vector views share
    every node event). Views whose topics are disjoint gain nothing from it, and lose a little (more,
    smaller transactions per view; all their row caches in memory at once): they are rebuilt one
    after the other. Returns each view's new generation.
    """
    generations: dict[str, int] = {}
    for group in _sharing_topics(views):
        if len(group) == 1:
            (db, projection), name = group[0], group[0][1].name
            report = (lambda at, head, name=name: progress(name, at, head)) if progress else None
            generations[name] = rebuild(
                db, projection, source, limit=limit, progress=report, bulk_limit=bulk_limit
            )
        else:
            generations |= _rebuild_in_one_pass(
                group, source, limit=limit, progress=progress, bulk_limit=bulk_limit
            )
    return generations


def _sharing_topics(
    views: Sequence[tuple[ViewDatabase, Projection]],
) -> list[list[tuple[ViewDatabase, Projection]]]:
    """The views grouped so that views sharing a topic (directly or through others) are together."""
    groups: list[tuple[set[str], list[tuple[ViewDatabase, Projection]]]] = []
    for view in views:
        topics = set(view[1].topics)
        merged = [g for g in groups if g[0] & topics]
        groups = [g for g in groups if not g[0] & topics]
        members = [v for g in merged for v in g[1]] + [view]
        groups.append((topics.union(*(g[0] for g in merged)), members))
    return [members for _, members in groups]


def _rebuild_in_one_pass(
    views: Sequence[tuple[ViewDatabase, Projection]],
    source: EventSource,
    *,
    limit: int,
    progress: Callable[[str, int, int], None] | None,
    bulk_limit: int,
) -> dict[str, int]:
    """`rebuild` of several views in one pass over the log: each event is read and decoded once.

    The bulk phase reads the events of all the views' topics together and queues each view its own;
    a view applies them in transactions of its own database (rows and tracking position together,
    as always), in batches of its step, cut exactly where `rebuild` would cut them, and what is left
    at the end of the pass. A view with the live batch size (one that keeps state outside SQL) leaves
    that rest to its last stretch, as `rebuild` does. Then each view builds its indexes, applies its
    last events and switches, as `rebuild` does. Returns each view's new generation.
    """
    builds = [_Build.start(db, p, source) for db, p in views]
    steps = {b.projection.name: _bulk_step(b.projection, limit, bulk_limit) for b in builds}
    queues: dict[str, list[tuple[int, Any]]] = {b.projection.name: [] for b in builds}
    topics = sorted({t for _, p in views for t in p.topics})
    step = max(limit, bulk_limit)
    position = 0
    with ExitStack() as stack:
        for db, _ in views:
            stack.enter_context(db.bulk())
        stack.enter_context(fewer_gc_passes())
        reader = stack.enter_context(_Reader(source, topics, step, limit))
        for events, reached, head in reader:
            position = reached
            for build in builds:
                name, size = build.projection.name, steps[build.projection.name]
                handles = build.projection.handles_event
                waiting = queues[name]
                waiting += [(n, e) for n, e in events if handles(e)]
                while len(waiting) >= size:
                    chunk = waiting[:size]
                    del waiting[:size]
                    build.apply(chunk, chunk[-1][0])
                    _trim(build.caches)
                if progress:
                    progress(name, build.position, head)
        for build in builds:
            if steps[build.projection.name] == step:
                # The rest of the view's events up to where the pass stopped.
                build.apply(queues[build.projection.name], position)
            build.index()
    generations: dict[str, int] = {}
    for build in builds:
        name = build.projection.name
        report = (lambda at, head, name=name: progress(name, at, head)) if progress else None
        generations[name] = build.finish(source, limit, report)
    return generations


class _Reader:
    """The bulk phase's batches of events, read and decoded by a thread one batch ahead.

    Yields (events, position, head) from position 0 until the head is at most `limit` events away:
    up to `step` events of `topics` up to the head, and the position they take the view to. The
    thread reads while the caller applies the previous batch: on PostgreSQL the server runs the query
    meanwhile, on SQLite the library steps through the table without the GIL, and the rows of the
    previous batch are written (again without the GIL) while this one is decoded.
    """

    def __init__(self, source: EventSource, topics: Sequence[str], step: int, limit: int) -> None:
        self._source, self._topics, self._step, self._limit = source, list(topics), step, limit
        self._ready: queue.Queue[tuple[list[tuple[int, Any]], int, int] | BaseException | None]
        self._ready = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engram-rebuild-reader", daemon=True)

    def __enter__(self) -> _Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def __iter__(self) -> Iterator[tuple[list[tuple[int, Any]], int, int]]:
        while (item := self._ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def _run(self) -> None:
        position = 0
        try:
            while not self._stop.is_set() and (head := self._source.head()) - position > self._limit:
                events = self._source.decoded_events(position + 1, self._step, self._topics, stop=head)
                position = head if len(events) < self._step else events[-1][0]
                self._put((events, position, head))
            self._put(None)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(exc)

    def _put(self, item: tuple[list[tuple[int, Any]], int, int] | BaseException | None) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue


def _bulk_step(projection: Projection, limit: int, bulk_limit: int) -> int:
    if projection.keeps_state_outside_sql:
        # A projection that keeps state outside SQL writes it batch by batch, and what it writes is
        # shaped by its batches (the vector collections a batch finds a use for): it keeps the batch
        # size that live processing uses.
        return limit
    return max(limit, bulk_limit)


@dataclass
class _Build:
    """A generation being rebuilt: its row caches and how far it got."""

    db: ViewDatabase
    projection: Projection
    generation: int
    deferred: bool
    caches: dict[str, RowCache]
    memo: ViewMemo = field(default_factory=ViewMemo)
    position: int = 0
    done: int = 0

    @classmethod
    def start(cls, db: ViewDatabase, projection: Projection, source: EventSource) -> _Build:
        """Create the next generation's tables (and its tracking row, at position 0)."""
        # A subclass that overrides `create_schema` as a whole gets it whole, before the bulk load.
        deferred = type(projection).create_schema is Projection.create_schema
        with db.write() as conn:
            new = tracking.start_generation(conn, db, projection)
            if deferred:
                projection.create_tables(db, conn, new)
            else:
                projection.create_schema(db, conn, new)
        log.info("rebuild started", view=projection.name, generation=new, head=source.head())
        caches = {
            spec.name: RowCache.for_new_table(spec, db.table(spec.name, new)) for spec in projection.tables
        }
        return cls(db, projection, new, deferred, caches)

    def apply(self, events: Sequence[tuple[int, Any]], position: int) -> None:
        """Apply events already read (this view's, in log order) and track `position`, in one
        transaction; a failed one is isolated as live batches are (batches.py `isolate`)."""
        last = events[-1] if events else None
        key = (
            event_key(last[1].originator_id, last[1].originator_version)
            if last and last[0] == position
            else None
        )
        step = Step(self.generation, self.position, events, position, key, self.memo.held)
        try:
            with self.db.write() as conn:
                write_step(conn, self.db, self.projection, step, active=False, caches=self.caches)
        except Exception as exc:
            self._forget()
            if not may_be_the_events(exc):
                raise
            isolate(self.db, self.projection, step, exc, self.memo, active=False)
        self.position = position
        self.done += len(events)

    def _forget(self) -> None:
        """The caches hold what a rolled-back batch did: from now on rows are read back."""
        for cache in self.caches.values():
            cache.forget()

    def index(self) -> None:
        """The indexes deferred during the bulk load, then the planner's statistics of the filled
        tables, before the generation serves."""
        if self.deferred:
            with self.db.write() as conn:
                self.projection.create_indexes(self.db, conn, self.generation)
        self.db.analyze([self.db.table(spec.name, self.generation) for spec in self.projection.tables])

    def finish(self, source: EventSource, limit: int, progress: Callable[[int, int], None] | None) -> int:
        """Apply the last events in batches of `limit`, switch in the transaction of the last one,
        drop the older generations. Returns the generation now serving."""
        db, projection, new, caches = self.db, self.projection, self.generation, self.caches
        while True:
            try:
                with db.write() as conn:
                    head = source.head()
                    tracked = tracking.tracking(conn, db, new)
                    if head - tracked.position <= limit:
                        # Last stretch: apply what is left and switch in one transaction, so that no
                        # event slips between the rebuilt view and the live runner.
                        while (
                            step := next_step(conn, projection, source, self.memo, new, tracked, limit)
                        ) is not None:
                            write_step(conn, db, projection, step, active=False, caches=caches)
                            self.done += len(step.events)
                            tracked = tracking.tracking(conn, db, new)
                        tracking.switch(conn, db, projection, new)
                        projection.after_switch(db, conn, new)
                        break
                    step = next_step(conn, projection, source, self.memo, new, tracked, limit, head)
                    if step is not None:
                        write_step(conn, db, projection, step, active=False, caches=caches)
                        self.done += len(step.events)
                        position = step.position
                    else:
                        position = tracked.position
            except LogDiverged:
                raise
            except Exception as exc:
                # A batch failed (or the switch): its events again, in a transaction of their own that
                # isolates the one that fails. A failure that was not a batch's raises.
                self._forget()
                count, _ = run_batch(db, projection, source, self.memo, limit=limit, generation=new)
                if count == 0:
                    raise exc
                continue
            _trim(caches)
            if progress:
                progress(position, head)
        if progress:
            progress(source.head(), source.head())
        drop_generations(db, projection, keep=new)
        log.info("rebuild switched", view=projection.name, generation=new, events=self.done)
        return new


def _trim(caches: dict[str, RowCache]) -> None:
    for cache in caches.values():
        cache.trim(REBUILD_CACHE_ROWS)


def drop_generations(db: ViewDatabase, projection: Projection, *, keep: int) -> list[int]:
    """Drop every generation but `keep`: its tables, what it holds outside SQL, its tracking and holds.
    Returns the generations dropped."""
    with db.write() as conn:
        tracking.lock_out_readers(conn, db)
        old = [g for g in tracking.generations(conn, db) if g != keep]
        for generation in old:
            projection.drop_generation_extras(db, conn, generation)
            projection.drop_schema(db, conn, generation)
            tracking.forget_generation(conn, db, generation)
    return old


def collect_garbage(db: ViewDatabase, projection: Projection) -> dict[str, list[Any]]:
    """Drop what rebuilds that died left behind: every generation but the active one, and what any
    generation but the active one holds outside SQL without a record (a vector collection created
    just before the kill). Only while no rebuild of the view runs: the caller holds its rebuild lock.
    """
    with db.read() as conn:
        active = tracking.active_generation(conn, db, projection)
    generations = drop_generations(db, projection, keep=active)
    extras = projection.drop_stray_extras(keep=active)
    if generations or extras:
        log.warning(
            "dropped what unfinished rebuilds left",
            view=projection.name,
            generations=generations,
            extras=extras,
        )
    return {"generations": generations, "extras": extras}
