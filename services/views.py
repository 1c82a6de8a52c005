"""The application's views: keep them caught up, wait for them, report, rebuild and repair them.

In the embedded default nobody has to run a worker: a read first catches the views up in-process
(`ensure(position)`). When `engram worker` runs, it holds each view's lock, and readers wait for it
to reach their position instead, bounded by `ENGRAM_CONSISTENCY_TIMEOUT_S`. A read never rebuilds:
a view found ahead of the log (ADR 0018) fails the read with `ViewDiverged` until the worker or
`engram projections rebuild` rebuilds it (ADR 0032), and a view that holds a being's events back
(ADR 0031) fails that being's reads with `ViewHeldBack`.

The composition root (services/bootstrap.py) opens the view databases, the locks and the vector
index; this module uses them through their ports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any
from uuid import UUID

import structlog

from engram.projections import engine
from engram.projections.beings import BeingsView
from engram.projections.conversation_queries import ConversationReads
from engram.projections.conversations import ConversationsView
from engram.projections.engine import EventSource, Projection, ViewMemo, holds
from engram.projections.entity_profiles import ProfileReads, ProfilesView
from engram.projections.extraction import ExtractionReads, ExtractionView
from engram.projections.fact_queries import FactReads
from engram.projections.fact_search import FactSearch, FactSearchView
from engram.projections.facts import FactsView
from engram.projections.fulltext.overlap import Overlap
from engram.projections.fulltext.port import FullTextIndex
from engram.projections.fulltext.search import FullTextSearch
from engram.projections.importance import ImportanceReads, ImportanceView
from engram.projections.links import LinkReads, LinksView
from engram.projections.memory import MemoryView
from engram.projections.message_search import MessageSearchView
from engram.projections.note_search import NoteSearch, NoteSearchView
from engram.projections.notes import NotesView
from engram.projections.patrol_runs import PatrolRunsView
from engram.projections.queries import ReadModels
from engram.projections.ranking_cache import RankingCache
from engram.projections.sleep import SleepReads, SleepView
from engram.projections.sql import ViewDatabase
from engram.projections.tokens import TokensView
from engram.projections.vector_index import VectorIndex
from engram.projections.vectors import VectorQueries, VectorsView
from engram.services.config import Settings
from engram.services.errors import Conflict, ConsistencyTimeout, NotFound
from engram.services.ports import HeldLock, Lock, Locks, ViewStorage

log = structlog.get_logger("engram.views")


class ViewDiverged(ConsistencyTimeout):
    """A view is ahead of the event log (a power cut lost events it had applied): reads of it fail
    until it is rebuilt, by the worker or `engram projections rebuild` (ADR 0032)."""

    code = "view_diverged"


class ViewFromNewerCode(ConsistencyTimeout):
    """A view's tables were built by a newer Engram (a higher schema version than this code's): this
    process never rebuilds them back, which would undo the newer process's upgrade (ADR 0050)."""

    code = "view_from_newer_code"


class ViewUpgrading(ConsistencyTimeout):
    """A view's schema is older than this code's and reads in this process do not rebuild it (the HTTP
    server after its start): it serves again once the worker or `engram projections rebuild` did."""

    code = "view_upgrading"


class ViewHeldBack(ConsistencyTimeout):
    """A view holds back the being's events since one of them could not be applied (ADR 0031)."""

    code = "view_held_back"


class Views:
    def __init__(
        self,
        settings: Settings,
        source: EventSource,
        storage: ViewStorage,
        locks: Locks,
        vector_index: Callable[[], VectorIndex],
        fulltext: FullTextIndex,
        *,
        bulk_source: EventSource | None = None,
        extra: Iterable[Projection] = (),
    ) -> None:
        """`source`: the log the views follow; `bulk_source`: the same log, read straight from its
        table by rebuilds (default: `source`); `vector_index`: opens the index on first use; `fulltext`: the
        store's own full-text index of the memory view; `extra`:
        projections beyond the application's."""
        self.settings = settings
        self.source = source
        self.rebuild_on_read = True
        """Whether a read that finds a view of an older schema rebuilds it. The HTTP server turns it
        off once its start upgraded the views, so that no request ever rebuilds (ADR 0050)."""
        self._bulk_source = bulk_source or source
        self._storage = storage
        self._locks = locks
        self.vectors_view = VectorsView(vector_index)
        self.note_search_view = NoteSearchView(self.vectors_view)  # shares the vector index
        self.fact_search_view = FactSearchView(self.vectors_view)  # shares the vector index
        self.fulltext = fulltext  # kept by the memory view, searched by `search`
        self.projections: dict[str, Projection] = {
            p.name: p
            for p in (
                BeingsView(),
                NotesView(),
                MemoryView(self.fulltext),
                PatrolRunsView(),
                self.vectors_view,
                TokensView(),
                self.note_search_view,
                ConversationsView(),
                FactsView(),
                MessageSearchView(),
                ExtractionView(),
                self.fact_search_view,
                SleepView(),
                ImportanceView(),
                ProfilesView(),
                LinksView(),
                *extra,
            )
        }
        self.dbs: dict[str, ViewDatabase] = {name: storage.database(name) for name in self.projections}
        for name, projection in self.projections.items():
            engine.initialise(self.dbs[name], projection)
        self.memos: dict[str, ViewMemo] = {name: ViewMemo() for name in self.projections}
        """What this process remembers of each view between batches (projections/engine/tracking.py)."""
        self._catch_up_locks: dict[str, HeldLock] = {}
        # The highest position this process saw each view reach, after checking its schema version.
        # Positions never go back (writers of a view are serialised, and a rebuild switches only once
        # its generation has reached the head), so an `ensure` whose target is at most this position
        # has nothing to do and skips reading the view's position again.
        self._reached: dict[str, int] = {}
        self.ranking = RankingCache(settings.ranking_cache_nodes)
        self.overlap = Overlap()

    @property
    def vector_index(self) -> VectorIndex:
        return self.vectors_view.index

    @property
    def vectors(self) -> VectorQueries:
        """Searches on the vector collections (call `ensure()` first to include recent writes)."""
        return VectorQueries(self.vectors_view.index, self.vectors_view.searches)

    @property
    def read(self) -> ReadModels:
        """Queries on the views as they are now (call `ensure()` first to include recent writes)."""
        return ReadModels(self.dbs, self.projections, self.ranking)

    @property
    def note_search(self) -> NoteSearch:
        """The context pack's searches over notes (ADR 0049; call `ensure()` first)."""
        return NoteSearch(self.read, self.note_search_view)

    @property
    def conversations(self) -> ConversationReads:
        """Messages, sessions and summaries (ADR 0052; call `ensure()` first)."""
        return ConversationReads(self.read)

    @property
    def facts(self) -> FactReads:
        """Facts, entity refs and aliases, spaces (ADR 0056; call `ensure()` first)."""
        return FactReads(self.read)

    @property
    def extraction(self) -> ExtractionReads:
        """Messages fact extraction has still to read, and their states (ADR 0058; `ensure()` first)."""
        return ExtractionReads(self.read)

    @property
    def sleep(self) -> SleepReads:
        """Modes, phases, schedules and transitions (ADR 0060; call `ensure()` first)."""
        return SleepReads(self.read)

    @property
    def importance(self) -> ImportanceReads:
        """Every memory's importance on one 1–10 scale, by position (ADR 0060; `ensure()` first)."""
        return ImportanceReads(self.read)

    @property
    def profiles(self) -> ProfileReads:
        """Entity profiles and reflections (ADR 0064, 0065; call `ensure()` first)."""
        return ProfileReads(self.read)

    @property
    def links(self) -> LinkReads:
        """A-MEM links between a being's memories, from both ends (ADR 0062; `ensure()` first)."""
        return LinkReads(self.read)

    @property
    def fact_search(self) -> FactSearch:
        """Lexical and semantic candidates of fact searches (ADR 0059; call `ensure()` first)."""
        return FactSearch(self.read, self.fact_search_view)

    @property
    def search(self) -> FullTextSearch:
        """Text searches on the memory view, through a `ReadModels` of their own (`search.read`)."""
        return FullTextSearch(self.read, self.fulltext, self.overlap)

    def names(self) -> list[str]:
        return list(self.projections)

    def _check(self, name: str) -> None:
        if name not in self.projections:
            raise NotFound(f"no projection named {name!r}; projections are {', '.join(self.projections)}")

    def lock(self, name: str, purpose: str = "process") -> Lock:
        self._check(name)
        return self._locks.view_lock(name, purpose)

    def _catch_up_lock(self, name: str) -> HeldLock:
        """`lock(name)`, kept by this instance between catch-ups: its file (or connection) stays open,
        so taking it costs a flock (or a query). It still excludes workers, other processes and other
        threads (adapters/locks.py)."""
        held = self._catch_up_locks.get(name)
        if held is None:
            held = self._catch_up_locks.setdefault(name, self._locks.held_view_lock(name, "process"))
        return held

    def named_lock(self, key: str) -> Lock:
        """A process-wide exclusive lock for `key` (e.g. one patrol per being)."""
        return self._locks.named_lock(key)

    # -- reading consistently -------------------------------------------------------------------

    def positions(self, names: Iterable[str] | None = None) -> dict[str, int]:
        return {n: engine.status(self.dbs[n], self.projections[n]).position for n in (names or self.names())}

    def ensure(
        self, position: int | None = None, names: Iterable[str] | None = None, *, being: UUID | None = None
    ) -> None:
        """Make sure the views reached `position` (default: the head).

        Catches up in-process when no worker holds the view's lock, else waits for the worker. With
        `being`: raises `ViewHeldBack` when one of the views holds that being's events back. Raises
        `ViewDiverged` for a view ahead of the log; never rebuilds one (the worker does).
        """
        chosen = list(names or self.names())
        head: int | None = None
        if position is None:
            head = target = self.source.head()
        else:
            target = position
        behind: list[tuple[str, int]] = []
        for name in chosen:
            if self._reached.get(name, -1) >= target:
                continue
            db, projection = self.dbs[name], self.projections[name]
            seen = engine.position(db, projection)
            self.memos[name].held = seen.held
            if seen.needs_rebuild:
                self._upgrade(name, engine.status(db, projection).schema_version)
                behind.append((name, -1))  # position unknown after the upgrade; not cached
            elif head is not None and seen.position > head and seen.position > self.source.head():
                # Ahead of a head read *after* the view's position: the log lost what the view
                # applied. (The first head was read before: a view another thread moved on since
                # would look ahead of it.)
                raise self._diverged(name, seen.position, f"the log ends before position {seen.position}")
            else:
                self._saw(name, seen.position)
                if seen.position < target:
                    behind.append((name, seen.position))
        source = self._shared_read(behind, head)
        for name, reached in behind:
            if self._catch_up(name, source, target, head) and head is not None and reached >= 0:
                self._saw(name, head)  # catch_up returns once the view reached the head
            elif reached >= 0:
                self._saw(name, target)
        if being is not None:
            self._not_held(being, chosen)

    def _catch_up(self, name: str, source: EventSource, target: int, head: int | None) -> bool:
        """Catch the view up to `target` here, or wait for whoever holds its lock to get it there: a
        worker, or another thread or process catching up, after which this one may have to go on
        itself (its target may be further). True when this call caught it up, bounded by
        `ENGRAM_CONSISTENCY_TIMEOUT_S`."""
        db, projection = self.dbs[name], self.projections[name]
        lock = self._catch_up_lock(name)
        deadline = time.monotonic() + self.settings.consistency_timeout_s
        delay = 0.002
        while not lock.try_acquire():
            if engine.position(db, projection).position >= target:
                return False
            if time.monotonic() >= deadline:
                raise ConsistencyTimeout(
                    f"view {name} did not reach log position {target} in time; is `engram worker` "
                    "running and healthy? (`engram projections status`)",
                    position=target,
                    views=[name],
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        try:
            engine.catch_up(
                db,
                projection,
                source,
                until=target,
                head=head,
                limit=self.settings.projection_batch_size,
                memo=self.memos[name],
            )
        except engine.LogDiverged as exc:
            raise self._diverged(name, exc.position, str(exc)) from exc
        finally:
            lock.release()
        return True

    def _shared_read(self, behind: list[tuple[str, int]], head: int | None) -> EventSource:
        if head is None:
            return self.source
        known = [(reached, self.projections[name].topics) for name, reached in behind if reached >= 0]
        return engine.shared_read(self.source, known, head)

    def _saw(self, name: str, position: int) -> None:
        if position > self._reached.get(name, -1):
            self._reached[name] = position

    def _diverged(self, name: str, position: int, why: str) -> ViewDiverged:
        log.error("view is ahead of the log; reads of it fail until it is rebuilt", view=name, reason=why)
        self._reached.pop(name, None)
        engine.record_error(self.dbs[name], self.projections[name], f"LogDiverged: {why}")
        return ViewDiverged(
            f"the {name} view is ahead of the event log (the log lost events it had applied, as a power "
            f"cut does); it serves again once rebuilt: by `engram worker`, or `engram projections "
            f"rebuild {name}`",
            position=position,
            views=[name],
        )

    def _not_held(self, being: UUID, names: Iterable[str]) -> None:
        key = str(being)
        for name in names:
            if key not in self.memos[name].held:
                continue
            db, projection = self.dbs[name], self.projections[name]
            seen = engine.position(db, projection)  # released meanwhile by another process?
            self.memos[name].held = seen.held
            if key in seen.held:
                hold = next((h for h in engine.status(db, projection).holds if h.being == key), None)
                since = f" since {hold.since}, from its event at log position {hold.position}" if hold else ""
                raise ViewHeldBack(
                    f"the {name} view holds back this being's events{since}: one of them could not be "
                    f"applied. `engram projections status` shows why; `engram projections retry {name}` "
                    "applies them again once the cause is fixed",
                    position=hold.position if hold else None,
                    views=[name],
                )

    def rebuild_diverged(self, name: str, exc: engine.LogDiverged) -> None:
        """The log lost events this view had applied (a power cut after commits that skipped the
        wait for the disk, ADR 0018): rebuild it from the log as it is. For the worker and admin
        commands only: a read never rebuilds (ADR 0032)."""
        log.error("view is ahead of the log; rebuilding it", view=name, reason=str(exc))
        self._reached.pop(name, None)
        try:
            self.rebuild(name)
        except Conflict:  # another process found it first; the old generation serves until it switches
            log.warning("view is ahead of the log; another process is rebuilding it", view=name)

    def catch_up_or_rebuild(self, names: Iterable[str] | None = None) -> None:
        """What `engram worker --once` does: every view caught up to the head, and a view found
        ahead of the log rebuilt."""
        for name in names or self.names():
            try:
                self.ensure(names=[name])
            except ViewDiverged:
                self.rebuild_diverged(name, engine.LogDiverged(name, -1, "found by a catch-up"))
                self.ensure(names=[name])

    def _upgrade(self, name: str, stored: int) -> None:
        """This code's schema differs from the view's tables: rebuild blue-green, unless a worker
        does it. Never to an older schema, and never in a process that turned `rebuild_on_read` off."""
        code = self.projections[name].schema_version
        if stored > code:
            self._reached.pop(name, None)
            raise ViewFromNewerCode(
                f"the {name} view was built by a newer Engram (view schema {stored}; this Engram knows "
                f"{code}): upgrade this Engram, or rebuild the view with it on purpose "
                f"(`engram projections rebuild {name}`)",
                views=[name],
            )
        if not self.rebuild_on_read:
            raise ViewUpgrading(
                f"the {name} view is being upgraded to this Engram's schema ({stored} to {code}); it "
                f"serves again once `engram worker` or `engram projections rebuild {name}` has rebuilt it",
                views=[name],
            )
        lock = self.lock(name)
        if not lock.try_acquire():
            return
        try:
            if engine.status(self.dbs[name], self.projections[name]).needs_rebuild:
                log.warning("view schema changed; rebuilding", view=name, stored=stored, code=code)
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
            pending = [
                n for n in pending if engine.position(self.dbs[n], self.projections[n]).position < position
            ]
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

    def problems(self) -> list[dict[str, Any]]:
        """The views that stopped or hold beings back, as a public health check may show them: the
        error's kind, never its text, and how many beings are held, never which."""
        out = []
        for name in self.names():
            st = engine.status(self.dbs[name], self.projections[name])
            if st.last_error is None and not st.holds:
                continue
            out.append(
                {
                    "view": name,
                    "last_error": st.last_error.split(":", 1)[0] if st.last_error else None,
                    "since": st.error_since,
                    "position": st.position,
                    "held_beings": len(st.holds),
                    "held_since": min((h.since for h in st.holds), default=None),
                }
            )
        return out

    def rebuild(self, name: str, progress: Callable[[int, int], None] | None = None) -> int:
        self._check(name)
        lock = self.lock(name, "rebuild")
        if not lock.try_acquire():
            raise Conflict(f"a rebuild of {name} is already running")
        try:
            self._drop_strays(name)
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
            for name in chosen:
                self._drop_strays(name)
            return engine.rebuild_many(
                [(self.dbs[n], self.projections[n]) for n in chosen],
                self._bulk_source,
                limit=self.settings.projection_batch_size,
                progress=progress,
            )
        finally:
            for lock in held:
                lock.release()

    def _drop_strays(self, name: str) -> None:
        """Before a rebuild (its lock held): what earlier rebuilds that died left outside SQL."""
        db, projection = self.dbs[name], self.projections[name]
        with db.read() as conn:
            active = engine.active_generation(conn, db, projection)
        dropped = projection.drop_stray_extras(keep=active)
        if dropped:
            log.warning("dropped what unfinished rebuilds left", view=name, extras=dropped)

    def collect_garbage(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Drop what unfinished rebuilds left (their generations, their vector collections) in every
        view no rebuild is running for; `engram projections gc`, and the worker when it starts."""
        out: dict[str, Any] = {}
        for name in names or self.names():
            lock = self.lock(name, "rebuild")
            if not lock.try_acquire():
                out[name] = "skipped: a rebuild is running"
                continue
            try:
                out[name] = engine.collect_garbage(self.dbs[name], self.projections[name])
            finally:
                lock.release()
        return out

    def retry(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Apply the events the views hold back again (`engram projections retry`). Where a worker
        runs the view, it is asked to (at its next step); otherwise it happens here."""
        out: list[dict[str, Any]] = []
        for name in names or self.names():
            self._check(name)
            db, projection = self.dbs[name], self.projections[name]
            beings = [h.being for h in engine.status(db, projection).holds]
            if not beings:
                continue
            lock = self._catch_up_lock(name)
            if not lock.try_acquire():
                holds.request_retry(db, projection, beings)
                out += [{"view": name, "being_id": b, "result": "asked the worker"} for b in beings]
                continue
            try:
                done = self.retry_held(name, beings)
            finally:
                lock.release()
            out += [
                {"view": name, "being_id": r.being, "result": "applied" if r.released else r.error}
                for r in done
            ]
        return out

    def retry_held(self, name: str, beings: Iterable[str] | None = None) -> list[engine.Retried]:
        """Apply the held events of `beings` (default: those whose next try is due) again. The caller
        holds the view's processing lock (the worker, `retry`)."""
        db, projection = self.dbs[name], self.projections[name]
        chosen = list(beings) if beings is not None else holds.due(db, projection)
        return holds.retry(
            db, projection, self.source, self.memos[name], chosen, limit=self.settings.projection_batch_size
        )

    def close(self) -> None:
        self.overlap.close()
        for lock in self._catch_up_locks.values():
            lock.close()
        self.vectors_view.close()
        for db in self.dbs.values():
            db.close()
        self._storage.close()
