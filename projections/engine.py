"""Tracked, resumable, rebuildable projections of the event log.

Each projection owns one view database. Its rows and its tracking position are
written in the same transaction, so every event is applied exactly once, also
when the process is killed mid-batch. Tables belong to a *generation*: live
processing writes the active one; a rebuild fills the next one from position 0
while the active one keeps serving reads, then switches the pointer in the
same transaction that applies the last events (blue-green).
"""

from __future__ import annotations

import gc
import queue
import threading
import time
import weakref
from abc import ABC
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from uuid import UUID

import structlog
from eventsourcing.persistence import Notification
from eventsourcing.utils import get_topic

from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import RowCache, TableSpec

log = structlog.get_logger("engram.projections")

DEFAULT_BATCH = 500

REBUILD_BATCH = 10_000
"""Events per transaction while a rebuild fills a generation that nobody reads yet. Large batches
write a row once for many events (a node is created, embedded and changed within one patrol), and
commit, checkpoint and round-trip less; the last events before the switch go in batches of the
view's usual size."""

GC_THRESHOLD_BULK = 100_000
"""The collector's first threshold while a rebuild loads (Python's default is 700 allocations)."""

REBUILD_CACHE_ROWS = 250_000
"""Rows per table a rebuild keeps in memory between batches (a few hundred MB at most); past it,
later batches read rows back from the table like live processing does."""


class EventSource(Protocol):
    """The part of the event log that projections read.

    A source whose log may give a position to a second event after a power cut (SQLite, when commits
    skipped the wait for the disk: ADR 0018) also has `reuses_positions = True` and `key_at(position)`,
    the `event_key` of the event at a position (None where there is none). Views then check, before
    each batch, that the event at their position is still the one they applied.
    """

    def head(self) -> int: ...

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]: ...

    def decode(self, notification: Notification) -> Any: ...


def read_events(
    source: EventSource, start: int, limit: int, topics: Sequence[str], stop: int | None = None
) -> list[tuple[int, Any]]:
    """(position, event) of up to `limit` events of `topics` from `start` to `stop`, in log order.

    A source may offer `decoded_events(start, limit, topics, stop)` doing just that in bulk
    (adapters/eventstore/log_reader.py); otherwise notifications are read and decoded one by one.
    """
    bulk = getattr(source, "decoded_events", None)
    if bulk is not None:
        return list(bulk(start, limit, topics, stop))
    return [(n.id, source.decode(n)) for n in source.notifications(start, limit, topics, stop=stop)]


class LogDiverged(RuntimeError):
    """The log no longer holds, at a view's position, the event the view applied there: a power cut
    lost the end of the log after the view had applied it, and the position went to another event
    (ADR 0018). The view must be rebuilt from the log."""

    def __init__(self, view: str, position: int, found: str) -> None:
        super().__init__(
            f"view {view}: the log no longer holds the event the view applied at position {position} "
            f"({found}); rebuild the view"
        )
        self.view, self.position = view, position


def event_key(originator_id: UUID | str, version: int) -> str:
    """What identifies an event in the log, whatever its position: its aggregate and version."""
    return f"{originator_id.hex if isinstance(originator_id, UUID) else originator_id}:{version}"


_checked: weakref.WeakKeyDictionary[ViewDatabase, tuple[int, int, str | None]] = weakref.WeakKeyDictionary()
"""Per view database, the (generation, position, key) this process last read from the log or found
there: a power cut, the only way the log loses events, ends the process too, so a tracking row that
still holds exactly this was checked already."""


def _key_lookup(source: EventSource) -> Callable[[int], str | None] | None:
    """The source's `key_at`, when its positions can be reused (else None: nothing to check)."""
    if not getattr(source, "reuses_positions", False):
        return None
    key_at: Callable[[int], str | None] = source.key_at  # type: ignore[attr-defined]
    return key_at


Handler = Callable[[Any, "Batch", Any], None]


@dataclass
class Batch:
    """What a handler sees: the batch's row caches, the connection, and the event's log position."""

    conn: ViewConnection
    caches: dict[str, RowCache]
    generation: int
    active: bool
    position: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)
    """What a projection's `before_commit` leaves for its `after_flush`."""

    def __post_init__(self) -> None:
        # Handlers reach a cache several times per event (`batch.nodes`): as instance attributes
        # they are found at once, without the failed lookup that precedes `__getattr__`.
        for name, cache in self.caches.items():
            if name not in self.__dataclass_fields__:
                self.__dict__[name] = cache

    def __getattr__(self, name: str) -> RowCache:
        try:
            return self.caches[name]
        except KeyError:
            raise AttributeError(name) from None


class Projection(ABC):
    """A view of the log. Subclasses declare tables and one handler per event type."""

    name: ClassVar[str]
    schema_version: ClassVar[int] = 1
    tables: ClassVar[tuple[TableSpec, ...]] = ()
    _handlers: ClassVar[dict[type, Handler]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = {}
        for attr in vars(cls).values():
            for event_type in getattr(attr, "_handles", ()):
                cls._handlers[event_type] = attr

    @property
    def topics(self) -> list[str]:
        return sorted(get_topic(t) for t in self._handlers)

    def create_schema(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """Everything a generation holds. A subclass that overrides this (rather than the two parts
        below) gets it all at the start of a rebuild too."""
        self.create_tables(db, conn, generation)
        self.create_indexes(db, conn, generation)

    def create_tables(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """The tables, with what writing rows needs (keys, unique constraints)."""
        for spec in self.tables:
            for statement in spec.table_ddl(db.table(spec.name, generation), db.dialect):
                conn.execute(statement)

    def create_indexes(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """What only reads need (secondary and full-text indexes). A rebuild creates it once its bulk
        load is done, before the generation serves: building an index over a loaded table costs a
        fraction of maintaining it row by row."""
        for spec in self.tables:
            for statement in spec.index_ddl(db.table(spec.name, generation)):
                conn.execute(statement)

    def drop_schema(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        for spec in self.tables:
            conn.execute(f"DROP TABLE IF EXISTS {db.table(spec.name, generation)}")

    def prefetch(self, batch: Batch, events: Sequence[Any]) -> None:
        """Load the rows the batch will touch in bulk; rows not prefetched load on first use.

        Not called when the batch's caches already hold every row (a rebuild's new generation)."""

    def apply(self, batch: Batch, events: Sequence[tuple[int, Any]]) -> None:
        if not all(cache.complete for cache in batch.caches.values()):
            self.prefetch(batch, [e for _, e in events])
        for position, event in events:
            handler = self._handlers.get(type(event))
            if handler is not None:
                batch.position = position
                handler(self, batch, event)

    def before_commit(self, batch: Batch) -> None:
        """Called after the handlers, before dirty rows are written and the transaction commits.

        The place to write outside SQL (the vector index): if it fails, the transaction rolls back and
        the tracking position does not move.
        """

    def after_flush(self, batch: Batch) -> None:
        """Called after the dirty rows are written, in the same transaction (e.g. to index them)."""

    def after_switch(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """Called inside the transaction that made `generation` active (e.g. to move aliases)."""

    def drop_generation_extras(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """Drop what a generation holds outside SQL (e.g. vector collections), before its tables go."""


def handles(*event_types: type) -> Callable[[Handler], Handler]:
    def mark(fn: Handler) -> Handler:
        fn._handles = event_types  # type: ignore[attr-defined]
        return fn

    return mark


# -- metadata: active generation and tracking, per view -------------------------------------------


def _meta(db: ViewDatabase) -> tuple[str, str]:
    return db.table("meta", 0), db.table("tracking", 0)


def initialise(db: ViewDatabase, projection: Projection) -> None:
    meta, tracking = _meta(db)
    with db.write() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {meta} (name TEXT PRIMARY KEY, active_generation INTEGER NOT NULL, "
            "schema_version INTEGER NOT NULL, last_error TEXT, last_error_at TEXT)"
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {tracking} (generation INTEGER PRIMARY KEY, position BIGINT NOT NULL, "
            "updated_at DOUBLE PRECISION NOT NULL, event_key TEXT)"
        )
        _add_event_key(conn, tracking)
        if conn.query_one(f"SELECT name FROM {meta} WHERE name = ?", [projection.name]) is None:
            projection.create_schema(db, conn, 1)
            conn.execute(
                f"INSERT INTO {meta} (name, active_generation, schema_version) VALUES (?, 1, ?)",
                [projection.name, projection.schema_version],
            )
            conn.execute(
                f"INSERT INTO {tracking} (generation, position, updated_at) VALUES (1, 0, ?)", [time.time()]
            )


def _add_event_key(conn: ViewConnection, tracking: str) -> None:
    """Views tracked before ADR 0018 gain the column; their key stays NULL (unchecked) until their
    next batch."""
    if conn.dialect == "postgres":
        # Asked first: ALTER TABLE takes an exclusive lock even when the column exists.
        present = conn.query_one(
            "SELECT 1 AS present FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'event_key'",
            [tracking],
        )
    else:
        present = next(
            (r for r in conn.query(f"PRAGMA table_info({tracking})") if r["name"] == "event_key"), None
        )
    if present is None:
        conn.execute(f"ALTER TABLE {tracking} ADD COLUMN event_key TEXT")


@dataclass(frozen=True)
class ViewStatus:
    name: str
    generation: int
    position: int
    schema_version: int
    code_schema_version: int
    last_error: str | None
    last_error_at: str | None
    building: dict[int, int]

    @property
    def needs_rebuild(self) -> bool:
        return self.schema_version != self.code_schema_version


def status(db: ViewDatabase, projection: Projection) -> ViewStatus:
    meta, tracking = _meta(db)
    with db.read() as conn:
        row = conn.query_one(f"SELECT * FROM {meta} WHERE name = ?", [projection.name])
        assert row is not None, "initialise() first"
        positions = {
            int(r["generation"]): int(r["position"]) for r in conn.query(f"SELECT * FROM {tracking}")
        }
    gen = int(row["active_generation"])
    return ViewStatus(
        name=projection.name,
        generation=gen,
        position=positions.get(gen, 0),
        schema_version=int(row["schema_version"]),
        code_schema_version=projection.schema_version,
        last_error=row["last_error"],
        last_error_at=row["last_error_at"],
        building={g: p for g, p in positions.items() if g > gen},
    )


def position(db: ViewDatabase, projection: Projection) -> tuple[int, bool]:
    """(the active generation's position, whether the view needs a rebuild): `status` in one query."""
    meta, tracking = _meta(db)
    with db.read() as conn:
        row = conn.query_one(
            f"SELECT t.position AS position, m.schema_version AS schema_version FROM {meta} m "
            f"LEFT JOIN {tracking} t ON t.generation = m.active_generation WHERE m.name = ?",
            [projection.name],
        )
    assert row is not None, "initialise() first"
    return int(row["position"] or 0), int(row["schema_version"]) != projection.schema_version


def active_generation(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> int:
    meta, _ = _meta(db)
    row = conn.query_one(f"SELECT active_generation FROM {meta} WHERE name = ?", [projection.name])
    if row is None:
        raise LookupError(f"view {projection.name} is not initialised")
    return int(row["active_generation"])


def record_error(db: ViewDatabase, projection: Projection, error: str | None) -> None:
    meta, _ = _meta(db)
    with db.write() as conn:
        conn.execute(
            f"UPDATE {meta} SET last_error = ?, last_error_at = ? WHERE name = ?",
            [error, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if error else None, projection.name],
        )


# -- processing ------------------------------------------------------------------------------------


def _tracked(conn: ViewConnection, db: ViewDatabase, generation: int) -> int:
    return _tracking(conn, db, generation)[0]


def _tracking(conn: ViewConnection, db: ViewDatabase, generation: int) -> tuple[int, str | None]:
    """(position, event key) of a generation."""
    _, tracking = _meta(db)
    row = conn.query_one(f"SELECT position, event_key FROM {tracking} WHERE generation = ?", [generation])
    return (int(row["position"]), row["event_key"]) if row else (0, None)


def active_position(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> tuple[int, int]:
    """(active generation, its tracked position) in one query."""
    generation, (position, _) = _active_tracking(conn, db, projection)
    return generation, position


def _active_tracking(
    conn: ViewConnection, db: ViewDatabase, projection: Projection
) -> tuple[int, tuple[int, str | None]]:
    """(active generation, (its tracked position, event key)) in one query."""
    meta, tracking = _meta(db)
    row = conn.query_one(
        f"SELECT m.active_generation AS generation, t.position AS position, t.event_key AS event_key "
        f"FROM {meta} m LEFT JOIN {tracking} t ON t.generation = m.active_generation WHERE m.name = ?",
        [projection.name],
    )
    if row is None:
        raise LookupError(f"view {projection.name} is not initialised")
    return int(row["generation"]), (int(row["position"] or 0), row["event_key"])


def _apply_batch(
    db: ViewDatabase,
    conn: ViewConnection,
    projection: Projection,
    source: EventSource,
    generation: int,
    limit: int,
    *,
    active: bool = True,
    start: tuple[int, str | None] | None = None,
    head: int | None = None,
    caches: dict[str, RowCache] | None = None,
) -> tuple[int, int]:
    """Apply up to `limit` events after the generation's position; return (events seen, new position).

    `start` (the generation's position and event key, read in this transaction) and `head` (a log
    position already committed) spare the queries when the caller knows them. `caches` are kept from
    batch to batch by a rebuild; by default each batch starts with empty ones.

    Raises `LogDiverged` when the log no longer holds the event the view applied at its position.
    """
    _, tracking = _meta(db)
    position, tracked_key = _tracking(conn, db, generation) if start is None else start
    key_at = _key_lookup(source)
    checked = (generation, position, tracked_key)
    if key_at is not None and tracked_key is not None and position > 0 and _checked.get(db) != checked:
        found = key_at(position)
        if found != tracked_key:
            raise LogDiverged(
                projection.name, position, f"{found or 'no event'} where it applied {tracked_key}"
            )
        _checked[db] = checked
    # Read the head first: if fewer than `limit` matching events come back, the view has seen
    # everything up to that head, also the events of topics it does not handle.
    if head is None:
        head = source.head()
        if head < position:  # the log ends before what the view applied
            raise LogDiverged(projection.name, position, f"the log ends at {head}")
    if head <= position:
        return 0, position
    events = read_events(source, position + 1, limit, projection.topics, stop=head)
    new_position = head if len(events) < limit else events[-1][0]
    new_key: str | None = None
    if events and events[-1][0] == new_position:
        new_key = event_key(events[-1][1].originator_id, events[-1][1].originator_version)
    elif key_at is not None:
        new_key = key_at(new_position)
    if key_at is not None and new_key is not None:
        # This process read that key from the log itself: the next batch need not read it again.
        # (Were this transaction rolled back, the row would not match and the check would run.)
        _checked[db] = (generation, new_position, new_key)
    if caches is None:
        caches = {spec.name: RowCache(spec, db.table(spec.name, generation)) for spec in projection.tables}
    batch = Batch(conn=conn, caches=caches, generation=generation, active=active)
    projection.apply(batch, events)
    projection.before_commit(batch)
    for cache in caches.values():
        cache.flush(conn)
    projection.after_flush(batch)
    conn.execute(
        f"UPDATE {tracking} SET position = ?, updated_at = ?, event_key = ? WHERE generation = ?",
        [new_position, time.time(), new_key, generation],
    )
    return len(events), new_position


def process(
    db: ViewDatabase, projection: Projection, source: EventSource, *, limit: int = DEFAULT_BATCH
) -> int:
    """One live batch into the active generation. Returns the number of events applied."""
    with db.write() as conn:
        generation = active_generation(conn, db, projection)
        count, _ = _apply_batch(db, conn, projection, source, generation, limit)
    return count


BULK_BACKLOG_BATCHES = 10
"""`catch_up` writes the rest of a backlog in a bulk block when more than this many batches remain."""


def catch_up(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    until: int | None = None,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    head: int | None = None,
) -> int:
    """Process batches until the view reaches `until` (default: the head at the start).

    `head`: the log's head, when the caller has just read it (one query less per view).
    """
    if head is None:
        head = source.head()
    # Never past the head: tracking a position the log has not reached would skip its events.
    target = head if until is None else min(until, head)
    total = 0
    with ExitStack() as stack:
        in_bulk = False
        while True:
            with db.write() as conn:
                generation, start = _active_tracking(conn, db, projection)
                if start[0] >= target:
                    return total
                count, position = _apply_batch(
                    db, conn, projection, source, generation, limit, start=start, head=target
                )
            total += count
            if progress:
                progress(count)
            if position >= target:  # spares a transaction that would only find the view caught up
                return total
            if not in_bulk and target - position > BULK_BACKLOG_BATCHES * limit:
                # A backlog: the rest as a rebuild writes, on a connection of its own whose pages go
                # with it (ADR 0023's addendum). Not for a few batches behind, as a busy worker
                # often is: that connection starts with an empty cache.
                stack.enter_context(db.bulk())
                in_bulk = True


def rebuild(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
    bulk_limit: int = REBUILD_BATCH,
) -> int:
    """Blue-green rebuild: fill a new generation from position 0, then switch to it atomically.

    Reads keep using the active generation until the switch. Returns the new generation.

    Three phases. Bulk: batches of `bulk_limit` events into tables without secondary indexes, their
    rows kept in memory from batch to batch (only the rebuild writes them). Then the indexes are built
    over the loaded tables. Last stretch: batches of `limit` events up to the head, the last ones and
    the switch in one transaction. Every batch commits its rows with the generation's tracking
    position, as live processing does; a rebuild that dies leaves a generation that never serves and
    that the next rebuild drops.
    """
    build = _Build.start(db, projection, source)
    step = _bulk_step(projection, limit, bulk_limit)
    with db.bulk(), fewer_gc_passes(), _Reader(source, projection.topics, step, limit) as reader:
        for events, position, head in reader:
            with db.write() as conn:
                build.apply(conn, events, position)
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
                handled = build.projection._handlers
                waiting = queues[name]
                waiting += [(n, e) for n, e in events if type(e) in handled]
                while len(waiting) >= size:
                    chunk = waiting[:size]
                    del waiting[:size]
                    with build.db.write() as conn:
                        build.apply(conn, chunk, chunk[-1][0])
                    _trim(build.caches)
                if progress:
                    progress(name, build.position, head)
        for build in builds:
            if steps[build.projection.name] == step:
                # The rest of the view's events up to where the pass stopped.
                with build.db.write() as conn:
                    build.apply(conn, queues[build.projection.name], position)
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
                events = read_events(self._source, position + 1, self._step, self._topics, stop=head)
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
    if type(projection).drop_generation_extras is not Projection.drop_generation_extras:
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
    position: int = 0
    done: int = 0

    @classmethod
    def start(cls, db: ViewDatabase, projection: Projection, source: EventSource) -> _Build:
        """Create the next generation's tables (and its tracking row, at position 0)."""
        _, tracking = _meta(db)
        # A subclass that overrides `create_schema` as a whole gets it whole, before the bulk load.
        deferred = type(projection).create_schema is Projection.create_schema
        with db.write() as conn:
            current = active_generation(conn, db, projection)
            rows = conn.query(f"SELECT generation FROM {tracking}")
            new = max([current, *(int(r["generation"]) for r in rows)]) + 1
            if deferred:
                projection.create_tables(db, conn, new)
            else:
                projection.create_schema(db, conn, new)
            conn.execute(
                f"INSERT INTO {tracking} (generation, position, updated_at) VALUES (?, 0, ?)",
                [new, time.time()],
            )
        log.info("rebuild started", view=projection.name, generation=new, head=source.head())
        caches = {
            spec.name: RowCache.for_new_table(spec, db.table(spec.name, new)) for spec in projection.tables
        }
        return cls(db, projection, new, deferred, caches)

    def apply(self, conn: ViewConnection, events: Sequence[tuple[int, Any]], position: int) -> None:
        """Apply events already read (this view's, in log order) and track `position`."""
        _, tracking = _meta(self.db)
        batch = Batch(conn=conn, caches=self.caches, generation=self.generation, active=False)
        self.projection.apply(batch, events)
        self.projection.before_commit(batch)
        for cache in self.caches.values():
            cache.flush(conn)
        self.projection.after_flush(batch)
        last = events[-1] if events else None
        conn.execute(
            f"UPDATE {tracking} SET position = ?, updated_at = ?, event_key = ? WHERE generation = ?",
            [
                position,
                time.time(),
                event_key(last[1].originator_id, last[1].originator_version)
                if last and last[0] == position
                else None,
                self.generation,
            ],
        )
        self.position = position
        self.done += len(events)

    def index(self) -> None:
        if self.deferred:
            with self.db.write() as conn:
                self.projection.create_indexes(self.db, conn, self.generation)

    def finish(self, source: EventSource, limit: int, progress: Callable[[int, int], None] | None) -> int:
        """Apply the last events in batches of `limit`, switch in the transaction of the last one,
        drop the older generations. Returns the generation now serving."""
        db, projection, new, caches = self.db, self.projection, self.generation, self.caches
        while True:
            with db.write() as conn:
                head = source.head()
                position = _tracked(conn, db, new)
                if head - position <= limit:
                    # Last stretch: apply what is left and switch in one transaction, so that no event
                    # slips between the rebuilt view and the live runner.
                    while True:
                        count, position = _apply_batch(
                            db, conn, projection, source, new, limit, active=False, caches=caches
                        )
                        self.done += count
                        if position >= source.head():
                            break
                    meta, _ = _meta(db)
                    conn.execute(
                        f"UPDATE {meta} SET active_generation = ?, schema_version = ? WHERE name = ?",
                        [new, projection.schema_version, projection.name],
                    )
                    projection.after_switch(db, conn, new)
                    break
                count, position = _apply_batch(
                    db, conn, projection, source, new, limit, active=False, caches=caches
                )
            self.done += count
            _trim(caches)
            if progress:
                progress(position, head)
        if progress:
            progress(source.head(), source.head())
        drop_generations(db, projection, keep=new)
        log.info("rebuild switched", view=projection.name, generation=new, events=self.done)
        return new


_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, ...] = ()


@contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """Run the cyclic garbage collector less often while a rebuild loads a generation, or patrol
    changes nodes in bulk.

    A bulk load allocates millions of objects (decoded events, rows) and keeps hundreds of thousands
    alive (the row caches); the collector's default thresholds then traverse the caches again and
    again, a sixth of a rebuild's CPU time. A patrol step that loads, changes and saves a thousand
    nodes keeps tens of thousands alive long enough to be promoted, which sets off a full collection
    (~0.1 s) every other patrol. Those objects form no cycles and are freed by reference counting:
    collections only happen less often, for the whole process, until the last user leaves.
    """
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            first, *rest = _gc_saved
            gc.set_threshold(max(first, GC_THRESHOLD_BULK), *rest)
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0:
                gc.set_threshold(*_gc_saved)


def _trim(caches: dict[str, RowCache]) -> None:
    for cache in caches.values():
        cache.trim(REBUILD_CACHE_ROWS)


def drop_generations(db: ViewDatabase, projection: Projection, *, keep: int) -> None:
    meta, tracking = _meta(db)
    with db.write() as conn:
        if conn.dialect == "postgres":
            # A reader reads the active generation from `meta`, then its tables, in one transaction
            # that holds meta's ACCESS SHARE lock until it ends. Waiting for this lock means waiting
            # for every reader that may have picked an old generation before the switch, so none of
            # them finds its tables gone. (SQLite readers keep their snapshot, dropped tables included.)
            conn.execute(f"LOCK TABLE {meta} IN ACCESS EXCLUSIVE MODE")
        old = [int(r["generation"]) for r in conn.query(f"SELECT generation FROM {tracking}")]
        for generation in (g for g in old if g != keep):
            projection.drop_generation_extras(db, conn, generation)
            projection.drop_schema(db, conn, generation)
            conn.execute(f"DELETE FROM {tracking} WHERE generation = ?", [generation])


def read_tables(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> dict[str, str]:
    """Physical names of the active generation's tables, for queries."""
    generation = active_generation(conn, db, projection)
    return {spec.name: db.table(spec.name, generation) for spec in projection.tables}


def iter_keys(events: Iterable[Any], attr: str = "originator_id") -> list[str]:
    return [str(getattr(e, attr)) for e in events if getattr(e, attr, None) is not None]
