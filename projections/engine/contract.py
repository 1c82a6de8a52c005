"""The runner contract: what a projection declares (tables, one handler per event type, hooks around a
batch) and what its handlers see (`Batch`)."""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from engram.projections.engine.rows import RowCache
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.tables import TableSpec

Handler = Callable[[Any, "Batch", Any], None]

NO_BEING = "-"
"""What `Projection.hold_key` gives an event that belongs to no being (an admin token's)."""


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
        from eventsourcing.utils import get_topic  # here: importing the contract needs no event store

        return sorted(get_topic(t) for t in self._handlers)

    def handles_event(self, event: Any) -> bool:
        return type(event) in self._handlers

    @staticmethod
    def hold_key(event: Any) -> str:
        """Whose events are held back together when one of them cannot be applied (holds.py): the
        being's. A being's rows change only through its own events, so holding them back leaves
        every other being's rows as they would be."""
        being_id = getattr(event, "being_id", None)
        return NO_BEING if being_id is None else str(being_id)

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

    @property
    def keeps_state_outside_sql(self) -> bool:
        """Whether generations hold more than their tables (vector collections): a rebuild then keeps
        live batch sizes, and dropping a generation calls `drop_generation_extras`."""
        return type(self).drop_generation_extras is not Projection.drop_generation_extras

    def drop_generation_extras(self, db: ViewDatabase, conn: ViewConnection, generation: int) -> None:
        """Drop what a generation holds outside SQL (e.g. vector collections), before its tables go."""

    def drop_stray_extras(self, keep: int) -> list[str]:
        """Drop what generations other than `keep` hold outside SQL, with a record in their tables or
        without one (a rebuild killed between creating a vector collection and committing its
        record), and say what went. Called only while no rebuild of the view runs."""
        return []


def handles(*event_types: type) -> Callable[[Handler], Handler]:
    def mark(fn: Handler) -> Handler:
        fn._handles = event_types  # type: ignore[attr-defined]
        return fn

    return mark
