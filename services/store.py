"""Typed access to the event log for the command handlers and queries.

Translates the library's errors into the application's: an unknown id, an id
of another kind and an id of another being all read as `NotFound`, so no
caller can learn that another being's resource exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, Notification, RecordConflictError

from engram.domain.being import Being
from engram.services.aggregate_cache import AggregateCache, fork
from engram.services.errors import NotFound, WriteRaced
from engram.services.ports import EventStore

A = TypeVar("A", bound=Aggregate)


def _project(aggregate: Any, events: Iterable[Any]) -> Any:
    """The repository's projector without its per-event runtime Protocol check (an `assert
    isinstance(event, CanMutateProtocol)` that costs ~45 µs an event, more than decoding it)."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


def _checked(cls: type[A], aggregate_id: UUID, agg: Any, being_id: UUID | None) -> A:
    """`agg` if it is a `cls` (of `being_id`, when given), else `NotFound`, as `get` has it."""
    if not isinstance(agg, cls) or (being_id is not None and getattr(agg, "being_id", None) != being_id):
        raise NotFound(f"{cls.__name__} {aggregate_id} not found")
    return agg


class AggregateStore:
    def __init__(self, log: EventStore, cache: AggregateCache | None = None) -> None:
        self.log = log
        self.app = log.app
        self.cache = cache if cache is not None else AggregateCache(0)
        self.known_beings: dict[str, UUID] = {}
        # Called after every successful save, e.g. to wake an in-process worker at once.
        self.on_saved: list[Callable[[int], None]] = []

    def get(
        self, cls: type[A], aggregate_id: UUID, *, being_id: UUID | None = None, version: int | None = None
    ) -> A:
        if version is None and self._batch_reads():
            return _checked(cls, aggregate_id, self._load_many([aggregate_id]).get(aggregate_id), being_id)
        try:
            agg: Aggregate = self.app.repository.get(aggregate_id, version=version, projector_func=_project)
        except AggregateNotFoundError:
            raise NotFound(f"{cls.__name__} {aggregate_id} not found") from None
        return _checked(cls, aggregate_id, agg, being_id)

    def get_many(self, cls: type[A], ids: Sequence[UUID], *, being_id: UUID | None = None) -> list[A]:
        """`get` for many aggregates at once, in the order of `ids`, with the same `NotFound` rule.

        Two queries per few hundred aggregates (their latest snapshots, then the events after them)
        instead of two per aggregate: a patrol step that changes a thousand nodes loads them in
        milliseconds, not a second.
        """
        unique = list(dict.fromkeys(ids))
        if not unique or not self._batch_reads():
            return [self.get(cls, i, being_id=being_id) for i in ids]
        loaded = self._load_many(unique)
        return [_checked(cls, i, loaded.get(i), being_id) for i in ids]

    def find_many(self, cls: type[A], ids: Sequence[UUID], *, being_id: UUID | None = None) -> dict[UUID, A]:
        """The aggregates of `ids` that exist (as `cls`, of `being_id` when given), read as `get_many`
        reads them; an id without events is left out."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        if not self._batch_reads():
            found = {i: self.find(cls, i) for i in unique}
            return {i: _checked(cls, i, a, being_id) for i, a in found.items() if a is not None}
        loaded = self._load_many(unique)
        return {i: _checked(cls, i, a, being_id) for i, a in loaded.items() if a is not None}

    def get_being_and_many(self, cls: type[A], ids: Sequence[UUID], being_id: UUID) -> tuple[Being, list[A]]:
        """The being and `get_many(cls, ids, being_id=being_id)`, read by the same two queries (a read
        that reactivates nodes needs the being's cycle too)."""
        unique = list(dict.fromkeys([being_id, *ids]))
        if not self._batch_reads():
            return self.get(Being, being_id), self.get_many(cls, ids, being_id=being_id)
        loaded = self._load_many(unique)
        return _checked(Being, being_id, loaded.get(being_id), None), [
            _checked(cls, i, loaded.get(i), being_id) for i in ids
        ]

    def _batch_reads(self) -> bool:
        return self.log.batch_reads

    def _load_many(self, unique: Sequence[UUID]) -> dict[UUID, Any]:
        """Each id's aggregate (None: no events): the cached state, or else the latest snapshot, and
        the events after it, read for all ids with one query (services/aggregate_cache.py)."""
        cached = self.cache.get(list(unique))
        missing = [i for i in unique if i not in cached]
        snapshots = self.log.latest_snapshots(missing)
        after = {
            i: cached[i].version if i in cached else snapshots[i].originator_version if i in snapshots else 0
            for i in unique
        }
        records = self.log.records_after(after)
        to_event = self.app.mapper.to_domain_event
        loaded: dict[UUID, Any] = {}
        changed: list[Any] = []
        for i in unique:
            newer = records.get(i, ())
            if i in cached:
                loaded[i] = _project(fork(cached[i]), map(to_event, newer))
                if not newer:
                    continue
            else:
                first = [snapshots[i]] if i in snapshots else []
                loaded[i] = _project(None, map(to_event, chain(first, newer)))
            if loaded[i] is not None:
                changed.append(loaded[i])
        self.cache.put(changed)
        return loaded

    def find(self, cls: type[A], aggregate_id: UUID) -> A | None:
        try:
            return self.get(cls, aggregate_id)
        except NotFound:
            return None

    def save(self, *aggregates: Aggregate, durable: bool = True) -> int | None:
        """Save all pending events in one transaction; return the log position of the last one.

        `durable=False`: the commit does not wait for the disk. It is atomic and survives a crash of
        the process, but a power cut just after it may lose it (with the commits after it, never
        alone). For touches only, such as a recall's reactivations (ADR 0018).
        """
        try:
            recordings = self.log.save(aggregates, durable=durable)
        except (IntegrityError, RecordConflictError) as exc:
            raise WriteRaced(exc) from exc
        # A command's aggregates are likely to be loaded again (a node recalled twice, the being of
        # every command): those the cache holds are kept at their new version.
        self.cache.refresh(aggregates)
        if not recordings:
            return None
        position = max(r.notification.id for r in recordings)
        for callback in self.on_saved:
            callback(position)
        return position

    def events(self, aggregate_id: UUID, *, lte: int | None = None) -> list[Any]:
        return list(self.app.events.get(aggregate_id, lte=lte))

    def head(self) -> int:
        return self.log.head()

    def positions(self, aggregate_id: UUID) -> dict[int, int]:
        """Version -> log position of one aggregate's events."""
        return self.log.positions(aggregate_id)

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]:
        return self.log.notifications(start, limit, topics, stop)

    def iter_notifications(
        self, start: int = 1, page: int = 1000, topics: Sequence[str] = ()
    ) -> Iterator[Notification]:
        while True:
            batch = self.notifications(start, page, topics)
            yield from batch
            if len(batch) < page:
                return
            start = batch[-1].id + 1

    def decode(self, notification: Notification) -> Any:
        return self.log.decode(notification)

    def decoded_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, Any]]:
        """The log reader's bulk read: the views' catch-up after each write reads through it, without
        a `Notification` per row or the library's decode."""
        return self.log.decoded_events(start, limit, topics, stop)

    def tagged_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, str, Any]]:
        """`decoded_events` with each event's stored topic (services/views.py shares one read)."""
        return self.log.tagged_events(start, limit, topics, stop)

    @property
    def reuses_positions(self) -> bool:
        """See `EventLogSource.reuses_positions` (the views check their position against it)."""
        return self.log.reuses_positions

    def key_at(self, position: int) -> str | None:
        return self.log.key_at(position)

    def close(self) -> None:
        self.app.close()
