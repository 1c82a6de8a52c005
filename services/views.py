"""The application's views: open them, keep them caught up, wait for them, report and rebuild them.

In the embedded default nobody has to run a worker: a read first catches the views up in-process
(`ensure(position)`). When `engram worker` runs, it holds each view's lock, and readers wait for it
to reach their position instead, bounded by `ENGRAM_CONSISTENCY_TIMEOUT_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse, urlunparse

import structlog
from eventsourcing.application import Application
from eventsourcing.persistence import Notification

from engram.adapters.eventstore.log_reader import EventLogSource
from engram.adapters.locks import AdvisoryLock, FileLock, HeldOpenAdvisoryLock, HeldOpenFileLock, Lock
from engram.projections import engine
from engram.projections.beings import BeingsView
from engram.projections.engine import EventSource, Projection
from engram.projections.memory import MemoryView
from engram.projections.notes import NotesView
from engram.projections.overlap import Overlap
from engram.projections.patrol_runs import PatrolRunsView
from engram.projections.queries import ReadModels
from engram.projections.ranking_cache import RankingCache
from engram.projections.sql import ViewDatabase
from engram.projections.tokens import TokensView
from engram.projections.vector_index import VectorIndex
from engram.projections.vectors import VectorQueries, VectorsView
from engram.services.config import Settings
from engram.services.errors import Conflict, ConsistencyTimeout, NotFound

log = structlog.get_logger("engram.views")


def _split_schema(url: str) -> tuple[str, str | None]:
    parsed = urlparse(url)
    schema = parse_qs(parsed.query).get("schema", [None])[0]
    return urlunparse(parsed._replace(query="")), schema


SHARED_READ_MAX_GAP = 64
"""Views at most this many events behind the head share one read of them in `ensure`."""


class SharedRead:
    """An `EventSource` that serves reads of (after, head] from events read once for several views.

    `events` are (position, stored topic, event) of every event of `topics` in (after, head]. A read
    outside that range, or of topics not all among them, goes to `source`. The views share the event
    objects, as a rebuild of several views does (projections/engine.py `rebuild_many`).
    """

    def __init__(
        self,
        source: EventSource,
        after: int,
        head: int,
        topics: Sequence[str],
        events: list[tuple[int, str, Any]],
    ) -> None:
        self.source, self.after, self.until = source, after, head
        self.topics = frozenset(topics)
        self.events = events

    def head(self) -> int:
        return self.source.head()

    @property
    def reuses_positions(self) -> bool:
        return bool(getattr(self.source, "reuses_positions", False))

    def key_at(self, position: int) -> str | None:
        """From the events read once when one of them is at `position` (the head, after a write,
        usually is): views that had nothing to apply then need no read of the log for their key."""
        if self.after < position <= self.until:
            for p, _, event in reversed(self.events):
                if p == position:
                    return engine.event_key(event.originator_id, event.originator_version)
                if p < position:
                    break
        key_at: Callable[[int], str | None] = self.source.key_at  # type: ignore[attr-defined]
        return key_at(position)

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> Sequence[Notification]:
        return self.source.notifications(start, limit, topics, stop)

    def decode(self, notification: Notification) -> Any:
        return self.source.decode(notification)

    def decoded_events(
        self, start: int, limit: int, topics: Sequence[str] = (), stop: int | None = None
    ) -> list[tuple[int, Any]]:
        wanted = set(topics)
        if (
            start <= self.after
            or stop is None
            or stop > self.until
            or not wanted
            or not wanted <= self.topics
        ):
            return engine.read_events(self.source, start, limit, topics, stop)
        out = [(p, e) for p, t, e in self.events if start <= p <= stop and t in wanted]
        return out[:limit]


class Views:
    def __init__(
        self,
        settings: Settings,
        source: EventSource,
        extra: Iterable[Projection] = (),
    ) -> None:
        self.settings = settings
        self.source = source
        app = getattr(source, "app", None)
        # Rebuilds read the application's log in bulk, straight from its table (log_reader.py).
        self._bulk_source: EventSource = EventLogSource(app) if isinstance(app, Application) else source
        self.vectors_view = VectorsView(self._open_vector_index)
        self.projections: dict[str, Projection] = {
            p.name: p
            for p in (
                BeingsView(),
                NotesView(),
                MemoryView(),
                PatrolRunsView(),
                self.vectors_view,
                TokensView(),
                *extra,
            )
        }
        self._pg: Any = None
        self._conninfo: str | None = None
        self.dbs: dict[str, ViewDatabase] = {}
        if settings.database_url is not None:
            from engram.adapters.views.postgres_db import PostgresViews

            self._conninfo, schema = _split_schema(settings.database_url.get_secret_value())
            self._pg = PostgresViews(self._conninfo, schema=schema)
            for name in self.projections:
                self.dbs[name] = self._pg.database(name)
        else:
            from engram.adapters.views.sqlite_db import SQLiteViewDatabase

            for name in self.projections:
                self.dbs[name] = SQLiteViewDatabase(
                    self._dir / f"{name}.sqlite3",
                    name,
                    cached_connections=settings.view_cached_connections,
                    cache_kib=settings.view_cache_mib * 1024,
                    heap_kib=settings.sqlite_heap_mib * 1024,
                )
        for name, projection in self.projections.items():
            engine.initialise(self.dbs[name], projection)
        self._catch_up_locks: dict[str, HeldOpenFileLock | HeldOpenAdvisoryLock] = {}
        # The highest position this process saw each view reach, after checking its schema version.
        # Positions never go back (writers of a view are serialised, and a rebuild switches only once
        # its generation has reached the head), so an `ensure` whose target is at most this position
        # has nothing to do and skips reading the view's position again.
        self._reached: dict[str, int] = {}
        self.ranking = RankingCache(settings.ranking_cache_nodes)
        self.overlap = Overlap()

    def _open_vector_index(self) -> VectorIndex:
        from engram.adapters.vectors import build_vector_index

        return build_vector_index(self.settings, self.settings.data_dir)

    @property
    def vector_index(self) -> VectorIndex:
        return self.vectors_view.index

    @property
    def vectors(self) -> VectorQueries:
        """Searches on the vector collections (call `ensure()` first to include recent writes)."""
        return VectorQueries(self.vectors_view.index)

    @property
    def read(self) -> ReadModels:
        """Queries on the views as they are now (call `ensure()` first to include recent writes)."""
        return ReadModels(self.dbs, self.projections, self.ranking, self.overlap)

    @property
    def _dir(self) -> Path:
        return self.settings.data_dir / "views"

    def names(self) -> list[str]:
        return list(self.projections)

    def _check(self, name: str) -> None:
        if name not in self.projections:
            raise NotFound(f"no projection named {name!r}; projections are {', '.join(self.projections)}")

    def lock(self, name: str, purpose: str = "process") -> Lock:
        self._check(name)
        if self._conninfo is not None:
            return AdvisoryLock(self._conninfo, self._advisory_key(f"{purpose}:{name}"))
        return FileLock(self._dir / f"{name}.{purpose}.lock")

    def _catch_up_lock(self, name: str) -> HeldOpenFileLock | HeldOpenAdvisoryLock:
        """`lock(name)`, kept by this instance between catch-ups: its file (or connection) stays open,
        so taking it costs a flock (or a query). It still excludes workers, other processes and other
        threads (adapters/locks.py)."""
        held = self._catch_up_locks.get(name)
        if held is None:
            fresh: HeldOpenFileLock | HeldOpenAdvisoryLock
            if self._conninfo is not None:
                fresh = HeldOpenAdvisoryLock(self._conninfo, self._advisory_key(f"process:{name}"))
            else:
                fresh = HeldOpenFileLock(self._dir / f"{name}.process.lock")
            held = self._catch_up_locks.setdefault(name, fresh)
        return held

    def _advisory_key(self, key: str) -> str:
        """A PostgreSQL advisory lock's key, scoped to the deployment's schema."""
        url = self.settings.database_url
        schema = _split_schema(url.get_secret_value())[1] if url else None
        return f"engram:{schema or 'public'}:{key}"

    def named_lock(self, key: str) -> Lock:
        """A process-wide exclusive lock for `key` (e.g. one patrol per being)."""
        if self._conninfo is not None:
            return AdvisoryLock(self._conninfo, self._advisory_key(key))
        return FileLock(self.settings.data_dir / "locks" / f"{key.replace(':', '-')}.lock")

    # -- reading consistently -------------------------------------------------------------------

    def positions(self, names: Iterable[str] | None = None) -> dict[str, int]:
        return {n: engine.status(self.dbs[n], self.projections[n]).position for n in (names or self.names())}

    def ensure(self, position: int | None = None, names: Iterable[str] | None = None) -> None:
        """Make sure the views reached `position` (default: the head).

        Catches up in-process when no worker holds the view's lock, else waits for the worker.
        """
        head: int | None = None
        if position is None:
            head = target = self.source.head()
        else:
            target = position
        behind: list[tuple[str, int]] = []
        for name in names or self.names():
            if self._reached.get(name, -1) >= target:
                continue
            db, projection = self.dbs[name], self.projections[name]
            reached, needs_rebuild = engine.position(db, projection)
            if needs_rebuild:
                self._upgrade(name, engine.status(db, projection).schema_version)
                behind.append((name, -1))  # position unknown after the upgrade; not cached
            elif head is not None and reached > head:  # the log lost what the view applied (ADR 0018)
                self.rebuild_diverged(name, engine.LogDiverged(name, reached, f"the log ends at {head}"))
            else:
                self._saw(name, reached)
                if reached < target:
                    behind.append((name, reached))
        source = self._shared_read(behind, head)
        for name, reached in behind:
            lock = self._catch_up_lock(name)
            if lock.try_acquire():
                try:
                    engine.catch_up(
                        self.dbs[name],
                        self.projections[name],
                        source,
                        until=target,
                        head=head,
                        limit=self.settings.projection_batch_size,
                    )
                except engine.LogDiverged as exc:
                    self.rebuild_diverged(name, exc)
                finally:
                    lock.release()
                if head is not None and reached >= 0:
                    self._saw(name, head)  # catch_up returns once the view reached the head
            else:
                self.wait_for(target, [name])
                if reached >= 0:
                    self._saw(name, target)

    def _shared_read(self, behind: list[tuple[str, int]], head: int | None) -> EventSource:
        """The source the views behind catch up from: when several are a few events behind the head,
        their events read and decoded once (after a recall, the memory and vector views both read
        the same node events)."""
        known = [reached for _, reached in behind if reached >= 0]
        if head is None or len(known) < 2 or head - min(known) > SHARED_READ_MAX_GAP:
            return self.source
        tagged = getattr(self.source, "tagged_events", None)
        if tagged is None:
            return self.source
        after = min(known)
        topics = sorted({t for name, _ in behind for t in self.projections[name].topics})
        # At most `head - after` events lie in (after, head]: with that limit the read is complete.
        return SharedRead(self.source, after, head, topics, tagged(after + 1, head - after, topics, head))

    def _saw(self, name: str, position: int) -> None:
        if position > self._reached.get(name, -1):
            self._reached[name] = position

    def rebuild_diverged(self, name: str, exc: engine.LogDiverged) -> None:
        """The log lost events this view had applied (a power cut after commits that skipped the
        wait for the disk, ADR 0018): rebuild it from the log as it is."""
        log.error("view is ahead of the log; rebuilding it", view=name, reason=str(exc))
        self._reached.pop(name, None)
        try:
            self.rebuild(name)
        except Conflict:  # another process found it first; the old generation serves until it switches
            log.warning("view is ahead of the log; another process is rebuilding it", view=name)

    def _upgrade(self, name: str, stored: int) -> None:
        """This code's schema differs from the view's tables: rebuild blue-green, unless a worker does it."""
        lock = self.lock(name)
        if not lock.try_acquire():
            return
        try:
            if engine.status(self.dbs[name], self.projections[name]).needs_rebuild:
                log.warning(
                    "view schema changed; rebuilding",
                    view=name,
                    stored=stored,
                    code=self.projections[name].schema_version,
                )
                self.rebuild(name)
        finally:
            lock.release()

    def wait_for(
        self, position: int, names: Iterable[str] | None = None, timeout: float | None = None
    ) -> None:
        deadline = time.monotonic() + (self.settings.consistency_timeout_s if timeout is None else timeout)
        pending = list(names or self.names())
        delay = 0.005
        while pending:
            pending = [n for n in pending if engine.position(self.dbs[n], self.projections[n])[0] < position]
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise ConsistencyTimeout(
                    f"views {', '.join(pending)} did not reach log position {position} in time; "
                    "is `engram worker` running and healthy? (`engram projections status`)",
                    position=position,
                    views=pending,
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    # -- admin ----------------------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        head = self.source.head()
        out = []
        for name in self.names():
            st = engine.status(self.dbs[name], self.projections[name])
            row = asdict(st)
            row.update(head=head, lag=max(0, head - st.position), needs_rebuild=st.needs_rebuild)
            out.append(row)
        return out

    def rebuild(self, name: str, progress: Callable[[int, int], None] | None = None) -> int:
        self._check(name)
        lock = self.lock(name, "rebuild")
        if not lock.try_acquire():
            raise Conflict(f"a rebuild of {name} is already running")
        try:
            return engine.rebuild(
                self.dbs[name],
                self.projections[name],
                self._bulk_source,
                limit=self.settings.projection_batch_size,
                progress=progress,
            )
        finally:
            lock.release()

    def rebuild_all(
        self,
        names: Iterable[str] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> dict[str, int]:
        """`rebuild` of several views (default: all); views that share topics in one pass (ADR 0011).

        Returns each view's new generation; `progress` gets (view, position, head).
        """
        chosen = list(names or self.names())
        for name in chosen:
            self._check(name)
        held: list[Lock] = []
        try:
            for name in chosen:
                lock = self.lock(name, "rebuild")
                if not lock.try_acquire():
                    raise Conflict(f"a rebuild of {name} is already running")
                held.append(lock)
            return engine.rebuild_many(
                [(self.dbs[n], self.projections[n]) for n in chosen],
                self._bulk_source,
                limit=self.settings.projection_batch_size,
                progress=progress,
            )
        finally:
            for lock in held:
                lock.release()

    def close(self) -> None:
        self.overlap.close()
        for lock in self._catch_up_locks.values():
            lock.close()
        if self.vectors_view._index is not None:
            self.vectors_view._index.close()
        for db in self.dbs.values():
            db.close()
        if self._pg is not None:
            self._pg.close()
