"""Tracked, resumable, rebuildable projections of the event log.

Each projection owns one view database. Its rows and its tracking position are
written in the same transaction, so every event is applied exactly once, also
when the process is killed mid-batch. Tables belong to a *generation*: live
processing writes the active one; a rebuild fills the next one from position 0
while the active one keeps serving reads, then switches the pointer in the
same transaction that applies the last events (blue-green).
"""

from __future__ import annotations

import time
from abc import ABC
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import structlog
from eventsourcing.persistence import Notification
from eventsourcing.utils import get_topic

from projections.sql import ViewConnection, ViewDatabase
from projections.tables import RowCache, TableSpec

log = structlog.get_logger("engram.projections")

DEFAULT_BATCH = 500


class EventSource(Protocol):
    """The part of the event log that projections read."""

    def head(self) -> int: ...

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]: ...

    def decode(self, notification: Notification) -> Any: ...


Handler = Callable[[Any, "Batch", Any], None]


@dataclass
class Batch:
    """What a handler sees: the batch's row caches, the connection, and the event's log position."""

    conn: ViewConnection
    caches: dict[str, RowCache]
    generation: int
    active: bool
    position: int = 0

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
        for spec in self.tables:
            for statement in spec.ddl(db.table(spec.name, generation), db.dialect):
                conn.execute(statement)

    def drop_schema(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        for spec in self.tables:
            conn.execute(f"DROP TABLE IF EXISTS {db.table(spec.name, generation)}")

    def prefetch(self, batch: Batch, events: Sequence[Any]) -> None:
        """Load the rows the batch will touch in bulk; rows not prefetched load on first use."""

    def apply(self, batch: Batch, events: Sequence[tuple[int, Any]]) -> None:
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
            f"CREATE TABLE IF NOT EXISTS {tracking} "
            "(generation INTEGER PRIMARY KEY, position BIGINT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)"
        )
        if conn.query_one(f"SELECT name FROM {meta} WHERE name = ?", [projection.name]) is None:
            projection.create_schema(db, conn, 1)
            conn.execute(
                f"INSERT INTO {meta} (name, active_generation, schema_version) VALUES (?, 1, ?)",
                [projection.name, projection.schema_version],
            )
            conn.execute(
                f"INSERT INTO {tracking} (generation, position, updated_at) VALUES (1, 0, ?)", [time.time()]
            )


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
    _, tracking = _meta(db)
    row = conn.query_one(f"SELECT position FROM {tracking} WHERE generation = ?", [generation])
    return int(row["position"]) if row else 0


def _apply_batch(
    db: ViewDatabase,
    conn: ViewConnection,
    projection: Projection,
    source: EventSource,
    generation: int,
    limit: int,
    *,
    active: bool = True,
) -> tuple[int, int]:
    """Apply up to `limit` events after the generation's position; return (events seen, new position)."""
    _, tracking = _meta(db)
    start = _tracked(conn, db, generation)
    # Read the head first: if fewer than `limit` matching events come back, the view has seen
    # everything up to that head, also the events of topics it does not handle.
    head = source.head()
    if head <= start:
        return 0, start
    notes = source.notifications(start + 1, limit, projection.topics, stop=head)
    new_position = head if len(notes) < limit else notes[-1].id
    events = [(n.id, source.decode(n)) for n in notes]
    caches = {spec.name: RowCache(spec, db.table(spec.name, generation)) for spec in projection.tables}
    batch = Batch(conn=conn, caches=caches, generation=generation, active=active)
    projection.apply(batch, events)
    projection.before_commit(batch)
    for cache in caches.values():
        cache.flush(conn)
    conn.execute(
        f"UPDATE {tracking} SET position = ?, updated_at = ? WHERE generation = ?",
        [new_position, time.time(), generation],
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


def catch_up(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    until: int | None = None,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Process batches until the view reaches `until` (default: the head at the start)."""
    target = source.head() if until is None else until
    total = 0
    while True:
        with db.write() as conn:
            generation = active_generation(conn, db, projection)
            if _tracked(conn, db, generation) >= target:
                return total
            count, _ = _apply_batch(db, conn, projection, source, generation, limit)
        total += count
        if progress:
            progress(count)


def rebuild(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Blue-green rebuild: fill a new generation from position 0, then switch to it atomically.

    Reads keep using the active generation until the switch. Returns the new generation.
    """
    _, tracking = _meta(db)
    with db.write() as conn:
        current = active_generation(conn, db, projection)
        rows = conn.query(f"SELECT generation FROM {tracking}")
        new = max([current, *(int(r["generation"]) for r in rows)]) + 1
        projection.create_schema(db, conn, new)
        conn.execute(
            f"INSERT INTO {tracking} (generation, position, updated_at) VALUES (?, 0, ?)", [new, time.time()]
        )
    log.info("rebuild started", view=projection.name, generation=new, head=source.head())
    done = 0
    while True:
        with db.write() as conn:
            head = source.head()
            position = _tracked(conn, db, new)
            if head - position <= limit:
                # Last stretch: apply what is left and switch in one transaction, so that no event
                # slips between the rebuilt view and the live runner.
                while True:
                    count, position = _apply_batch(db, conn, projection, source, new, limit, active=False)
                    done += count
                    if position >= source.head():
                        break
                meta, _ = _meta(db)
                conn.execute(
                    f"UPDATE {meta} SET active_generation = ?, schema_version = ? WHERE name = ?",
                    [new, projection.schema_version, projection.name],
                )
                projection.after_switch(db, conn, new)
                break
            count, position = _apply_batch(db, conn, projection, source, new, limit, active=False)
        done += count
        if progress:
            progress(position, head)
    if progress:
        progress(source.head(), source.head())
    drop_generations(db, projection, keep=new)
    log.info("rebuild switched", view=projection.name, generation=new, events=done)
    return new


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
