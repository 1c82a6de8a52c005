"""The `eventsourcing` application that stores Engram's aggregates.

It is only the log and its repository: command handlers live in `services/`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse
from uuid import UUID

import structlog
from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import BaseAggregate
from eventsourcing.persistence import JSONTranscoder, Mapper, Recording, Transcoder

from engram.adapters.eventstore.recorders import POSTGRES_FACTORY, SQLITE_FACTORY
from engram.adapters.eventstore.shredding import ShreddingMapper, first_slot, has_sealed_events
from engram.adapters.eventstore.transcodings import (
    DateAsISO,
    EmbeddingAsFloat32,
    StorableTextTranscoder,
    UUIDAsHex,
)
from engram.adapters.storage_full import is_storage_full, postgres_storage, reported_as_storage_full
from engram.domain.being import Being
from engram.domain.compaction import Compaction  # noqa: F401  (no view imports it: its topics resolve here)
from engram.domain.conversation import Conversation
from engram.domain.entity_profile import EntityProfile, ObservationCursor
from engram.domain.key_sealing import KeySealing  # noqa: F401  (its topics resolve here, ADR 0095)
from engram.domain.node import MemoryNode
from engram.domain.patrol_run import PatrolRun
from engram.domain.sleep import Sleep
from engram.domain.undo import Undo  # noqa: F401  (no view imports it: its topics resolve here, ADR 0072)
from engram.services.key_store import KeyStore, KeyStoreError

log = structlog.get_logger(__name__)

APPLICATION_NAME = "engram"
"""Table names on PostgreSQL derive from it: changing it orphans a deployment's log."""


def _postgres_env(url: str) -> dict[str, str]:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise ValueError("ENGRAM_DATABASE_URL must be a postgresql:// URL")
    env = {
        "PERSISTENCE_MODULE": POSTGRES_FACTORY,
        "POSTGRES_DBNAME": unquote(parsed.path.lstrip("/")) or "engram",
        "POSTGRES_HOST": unquote(parsed.hostname or "localhost"),
        "POSTGRES_PORT": str(parsed.port or 5432),
        "POSTGRES_USER": unquote(parsed.username or "postgres"),
        "POSTGRES_PASSWORD": unquote(parsed.password or ""),
        "POSTGRES_POOL_SIZE": "5",
        "POSTGRES_MAX_OVERFLOW": "10",
        "POSTGRES_LOCK_TIMEOUT": "5",
    }
    # A socket directory can be given as ?host=/path (libpq convention).
    for part in parsed.query.split("&"):
        key, _, value = part.partition("=")
        if key == "host" and value:
            env["POSTGRES_HOST"] = unquote(value)
        if key == "schema" and value:
            env["POSTGRES_SCHEMA"] = unquote(value)
    return env


def event_log_env(data_dir: Path, database_url: str | None) -> dict[str, str]:
    if database_url:
        return _postgres_env(database_url)
    data_dir.mkdir(parents=True, exist_ok=True)
    return {
        "PERSISTENCE_MODULE": SQLITE_FACTORY,
        "SQLITE_DBNAME": str(data_dir / "events.sqlite3"),
        "SQLITE_LOCK_TIMEOUT": "10",
    }


def _conninfo(env: dict[str, str]) -> str:
    parts = {
        "dbname": env["POSTGRES_DBNAME"],
        "host": env["POSTGRES_HOST"],
        "port": env["POSTGRES_PORT"],
        "user": env["POSTGRES_USER"],
        "password": env["POSTGRES_PASSWORD"],
    }
    return " ".join(f"{k}='{v}'" for k, v in parts.items() if v)


def _storage(env: Mapping[str, str]) -> str:
    if "SQLITE_DBNAME" in env:
        return env["SQLITE_DBNAME"]
    return postgres_storage(env["POSTGRES_DBNAME"], env["POSTGRES_HOST"], env["POSTGRES_PORT"])


def open_event_log(data_dir: Path, database_url: str | None, keys: KeyStore | None = None) -> EventLog:
    """Open (and on first use create) the log.

    On PostgreSQL the library creates its tables at start-up; processes starting at the same
    moment would run that DDL concurrently ("tuple concurrently updated"), so it is serialised
    with an advisory lock.
    """
    env = event_log_env(data_dir, database_url)
    app = _open(env, keys)
    if keys is not None and not keys.exists:
        # One scan, on the first start of this version only: the store is created right after.
        if has_sealed_events(app):
            app.close()
            raise KeyStoreError(
                f"the log holds encrypted events but the key store {keys.location} is missing: "
                "restore it (or point ENGRAM_DATA_DIR at the data dir that holds it)"
            )
        keys.create()
    return app


def _open(env: dict[str, str], keys: KeyStore | None) -> EventLog:
    if env["PERSISTENCE_MODULE"] != POSTGRES_FACTORY:
        # A process opening a SQLite database in WAL mode creates its shared-memory file: on a full disk,
        # even one that only reads fails here.
        with reported_as_storage_full(_storage(env)):
            return EventLog(env=env, keys=keys)
    import psycopg

    with psycopg.connect(_conninfo(env), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('engram-event-log-ddl'))")
        try:
            return EventLog(env=env, keys=keys)
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('engram-event-log-ddl'))")


class _ProcessingEvent(ProcessingEvent[UUID]):
    """The library's, with a nominal check for aggregates first: its runtime Protocol checks
    (`isinstance(obj, DomainEventProtocol)`, then `CollectEventsProtocol`) cost tens of µs per
    aggregate on every save, and a recall saves four. Anything else takes the library's path."""

    def collect_events(self, *objs: Any, **kwargs: Any) -> None:
        for obj in objs:
            # An aggregate is no domain event (it has no `originator_id`): the library would collect it.
            if isinstance(obj, BaseAggregate) and not hasattr(obj, "originator_id"):
                self.events.extend(obj.collect_events())
                self.aggregates[obj.id] = obj
            else:
                super().collect_events(obj)  # in order: the events keep the order they were given in
        self.saved_kwargs.update(kwargs)


class EventLog(Application[UUID]):
    name = APPLICATION_NAME
    # Beings gain an event per patrol cycle; snapshots keep their replay short.
    # A conversation gains an event per message (ADR 0052).
    # Nodes gain an event per read (reactivation): snapshots keep often-recalled nodes fast to load.
    # A recall or query loads the nodes it reactivates: every 10 events, a load replays at most 9
    # events after the snapshot (~8 µs each to decode), where 50 let it replay up to 49 (ADR 0015).
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {
        Being: 100,
        PatrolRun: 200,
        MemoryNode: 10,
        Conversation: 100,
        # A profile gains an event per dreaming tick that observed its entity; the cursor one per
        # tick that found something new (ADR 0064).
        EntityProfile: 50,
        ObservationCursor: 100,
        Sleep: 100,  # an event per sleep tick that did something (ADR 0060)
    }

    def __init__(self, env: Mapping[str, str] | None = None, keys: KeyStore | None = None) -> None:
        self.keys = keys  # set before the library constructs the mapper
        super().__init__(env=env)

    def construct_mapper(self) -> Mapper[UUID]:
        if self.keys is None:
            return super().construct_mapper()
        # Personal text sealed with its being's key (crypto-shredding, ADR 0073).
        mapper = ShreddingMapper(self.construct_transcoder(), self.keys)
        mapper.find_slot = lambda key_id: first_slot(self.recorder, key_id)  # ADR 0075
        return mapper

    def close(self) -> None:
        super().close()
        release = getattr(self.keys, "close", None)
        if release is not None:  # the key pool's unused reservations go (ADR 0075)
            release()

    @cached_property
    def storage(self) -> str:
        """What holds the log, as `StorageFull` names it: the SQLite file, or the database (no password)."""
        return _storage(self.env)

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """`Application.save` (eventsourcing 9.5), collecting through `_ProcessingEvent`.

        A full disk or database refuses the save as `StorageFull`, its transaction rolled back. The
        snapshots are taken after the events committed: they are a cache, and a full disk then only
        skips them (a later save takes them), so the command that wrote the events succeeds.
        """
        processing_event = _ProcessingEvent()
        processing_event.collect_events(*objs, **kwargs)
        prepare = getattr(self.mapper, "prepare", None)
        with reported_as_storage_full(self.storage):
            if prepare is not None:  # the save's item keys in one write to the key store (ADR 0075)
                prepare(processing_event.events)
            recordings = self._record(processing_event)
        try:
            self._take_snapshots(processing_event)
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            log.warning("snapshots skipped: no space left", path=self.storage)
        self._notify(recordings)
        self.notify(processing_event.events)  # the library's deprecated hook, kept as it calls it
        return recordings

    def _take_snapshots(self, processing_event: ProcessingEvent[UUID]) -> None:
        """The library's rule (a snapshot when an aggregate's event reaches a multiple of its
        interval), taken from the aggregate just saved when it stands at that event's version.

        The library replays the aggregate from the store to snapshot it: a query for its last
        snapshot, one for the events after it, and their decoding, in the request that happened to
        reach the interval (a recall, for a node every 10th time it is recalled). The saved object
        holds that state already. An aggregate saved past the interval in one go (its state at the
        interval's version no longer in memory) is replayed as the library does.
        """
        if not self.snapshots or not self.snapshotting_intervals:
            return
        taken = []
        for event in processing_event.events:
            aggregate = processing_event.aggregates.get(event.originator_id)
            interval = self.snapshotting_intervals.get(type(aggregate)) if aggregate is not None else None
            if aggregate is None or interval is None or event.originator_version % interval:
                continue
            if aggregate.version == event.originator_version:
                snapshot_class = getattr(type(aggregate), "Snapshot", type(self).snapshot_class)
                assert snapshot_class is not None  # the library's `take_snapshot` requires one too
                taken.append(snapshot_class.take(aggregate))
            else:
                self.take_snapshot(event.originator_id, version=event.originator_version)
        if taken:
            self.snapshots.put(taken)

    def construct_transcoder(self) -> Transcoder:
        transcoder = StorableTextTranscoder()
        self.register_transcodings(transcoder)
        return transcoder

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        transcoder.register(UUIDAsHex())  # replaces the library's, under the same name
        transcoder.register(EmbeddingAsFloat32())
        transcoder.register(DateAsISO())
