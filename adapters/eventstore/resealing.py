# ruff: noqa: S608  (table names from the library's recorders, values as parameters)
"""`engram keys seal` on the stored log (ADR 0095): rewrite the events written before encryption (in
clear, ADR 0074) or before item keys (sealed under the being's key, ADR 0075) into the form a new
write gives them, and keep the hash chain (ADR 0069) verifiable.

Each batch is one transaction that takes the log's write lock first (SQLite: its first statement is
a write; PostgreSQL: the library's `LOCK TABLE … IN EXCLUSIVE MODE`), rewrites the batch's `state`
bytes in place (same ids, versions, topics, positions), hashes the chain again from the batch's first
rewritten position to the head, and adds its counts to a progress row (`engram_key_sealing`): a run
killed between batches leaves a log that verifies, and the next run continues where it stopped (the
rows already rewritten are no longer candidates) and reports the whole range. Keys come from the
same choice as a new write (`key_choice.choose_key`) and the same key store (a new item key from the
owned-key pool, an item that has one already keeps it), and are on disk before the batch commits.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import structlog
from eventsourcing.sqlite import SQLiteAggregateRecorder
from eventsourcing.utils import resolve_topic

from engram.adapters.eventstore import chain
from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table
from engram.adapters.eventstore.key_choice import KeyChoice, choose_key
from engram.adapters.eventstore.shredding import (
    MAGIC,
    MAGIC_ITEM,
    MAGICS,
    ShreddingMapper,
    _owner,
    header_for,
    key_id_of,
    seal_state,
)
from engram.adapters.eventstore.shredding_storage import ShreddingStorage, vacuum_files
from engram.domain.key_sealing import sealing_receipt_id
from engram.services.key_store import KeyDestroyed, KeyStoreError

log = structlog.get_logger(__name__)

PROGRESS_TABLE = "engram_key_sealing"
ARCHIVE_TABLE = "engram_resealed_hashes"
"""The chain's hashes as they were before a seal rewrote them: (receipt id, position, hash)."""
BATCH = 5000
_RECEIPT_TOPICS = ("engram.Erasure.%", "engram.KeySealing.%")  # in clear by design (ADR 0073, 0095)
_NONCE = 12


@dataclass
class SealCounts:
    """What a run rewrote (or, in a dry run, would rewrite)."""

    in_clear: int = 0
    from_being_key: int = 0
    snapshots_dropped: int = 0
    keys_created: int = 0
    first_position: int | None = None
    last_position: int | None = None

    @property
    def events(self) -> int:
        return self.in_clear + self.from_being_key

    def add(self, other: SealCounts) -> None:
        self.in_clear += other.in_clear
        self.from_being_key += other.from_being_key
        self.snapshots_dropped += other.snapshots_dropped
        self.keys_created += other.keys_created
        for p in (other.first_position, other.last_position):
            if p is not None:
                self.first_position = p if self.first_position is None else min(self.first_position, p)
                self.last_position = p if self.last_position is None else max(self.last_position, p)


@dataclass(frozen=True)
class Pending:
    """The progress row of a run not yet closed by its receipt (a run killed, or under way)."""

    scope: str
    first_position: int
    last_position: int
    old_head_position: int
    old_head_hash: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Plan:
    """One stored event to rewrite: its place, its clear bytes and the key a new write would choose."""

    position: int
    originator_id: UUID
    version: int
    topic: str
    clear: bytes
    choice: KeyChoice
    was_clear: bool


def _bytes(state: Any) -> bytes:
    return state.encode() if isinstance(state, str) else bytes(state)


def _stored_in_clear(topic: str) -> bool:
    try:
        return bool(getattr(resolve_topic(topic), "stored_in_clear", False))
    except Exception:
        return False


class LogResealing:
    """`services.key_sealing.Resealer` over the application's recorders and key store."""

    def __init__(self, app: Any, data_dir: Path) -> None:
        self.app = app
        self.data_dir = data_dir
        self._slots: dict[int, UUID] | None = None  # key id → a slot an event names (EGK2 headers)
        self._known: dict[int, tuple[UUID, bytes]] = {}  # key id → (slot, key) taken by this run

    # -- deciding -----------------------------------------------------------------------------------

    def _mapper(self) -> ShreddingMapper:
        mapper = self.app.mapper
        if not isinstance(mapper, ShreddingMapper):
            raise KeyStoreError("this log has no key store: nothing can be sealed")
        return mapper

    def _plan(
        self, position: int, oid: Any, version: int, topic: str, stored: Any, beings: set[UUID] | None
    ) -> _Plan | None:
        """The rewrite a stored event needs to read as a new write would store it, or None."""
        state = _bytes(stored)
        oid = oid if isinstance(oid, UUID) else UUID(str(oid))
        mapper = self._mapper()
        head = state[:4]
        if head == MAGIC_ITEM:
            return None  # an item's or subject's key already (ADR 0075)
        was_clear = head != MAGIC
        if was_clear:
            if _stored_in_clear(topic):
                return None
            clear = state
        else:
            try:
                opened = mapper.open_state(oid, version, topic, state)
            except (KeyDestroyed, KeyStoreError):
                opened = None
            if opened is None:
                return None  # erased: nothing to rewrite, nothing readable
            clear = opened
        try:
            decoded = mapper.transcoder.decode(clear)
        except Exception:
            log.warning("keys seal: an event could not be decoded, left as it is", position=position)
            return None
        owner = _owner(decoded) if isinstance(decoded, dict) else None
        if owner is None or (beings is not None and owner not in beings):
            return None  # no being's event: a new write stores it in clear too
        if not was_clear and key_id_of(state) != owner:
            return None  # sealed under another being's key: not this being's to rewrite
        choice = choose_key(topic, oid, owner, decoded)
        if not was_clear and choice.is_being_key:
            return None  # the being's key is what a new write would choose
        return _Plan(position, oid, version, topic, clear, choice, was_clear)

    # -- keys ---------------------------------------------------------------------------------------

    def _existing_slots(self) -> dict[int, UUID]:
        """The slot each item or subject key id is already used under (from the log's `EGK2`
        headers, one scan): an item with events sealed under its key keeps that key."""
        if self._slots is None:
            self._slots = {}
            for slot, key_id, _, _ in ShreddingStorage(self.app, self.data_dir).item_headers():
                self._slots.setdefault(key_id.int, slot)
        return self._slots

    def _keys_for(self, plans: list[_Plan]) -> tuple[dict[int, tuple[bytes, bytes] | None], int]:
        """Each planned key id's (key, header), None where the key or its being was destroyed; and
        how many item keys were created."""
        keys = self.app.keys
        out: dict[int, tuple[bytes, bytes] | None] = {}
        wanted: list[tuple[UUID, UUID, str | None, UUID | None]] = []
        choices: list[KeyChoice] = []
        asked: set[int] = set()
        existing = self._existing_slots()
        for plan in plans:
            choice = plan.choice
            number = choice.key_id.int
            if number in out or number in asked:
                continue
            if choice.is_being_key:
                key = keys.key_for_writing(choice.key_id)
                out[number] = (key, header_for(choice.key_id)) if key is not None else None
                continue
            found = self._known.get(number)
            if found is None and number in existing:
                try:
                    slot = existing[number]
                    found = self._known[number] = (
                        slot,
                        keys.key_of_slot(slot, choice.key_id, choice.being_id),
                    )
                except (KeyDestroyed, KeyStoreError):
                    out[number] = None
                    continue
            if found is not None:
                out[number] = (found[1], self._item_header(choice, found[0]))
                continue
            asked.add(number)
            choices.append(choice)
            wanted.append((choice.key_id, choice.being_id, choice.subject, choice.item_id))
        created = 0
        if wanted:
            # The item's first event may be in a later batch: an aggregate with no key yet gets one now
            # (no lookup by key id, which the owned-key file has no index for, ADR 0075).
            taken = keys.create_keys(wanted, [c.key_id for c in choices])
            for choice, found in zip(choices, taken, strict=True):
                number = choice.key_id.int
                if found is None:
                    out[number] = None
                    continue
                created += 1
                self._known[number] = found
                existing[number] = found[0]
                out[number] = (found[1], self._item_header(choice, found[0]))
        return out, created

    @staticmethod
    def _item_header(choice: KeyChoice, slot: UUID) -> bytes:
        return MAGIC_ITEM + choice.key_id.bytes + choice.being_id.bytes + slot.bytes

    # -- the runs -----------------------------------------------------------------------------------

    def pending(self) -> Pending | None:
        with self._tx(write=False) as tx:
            return tx.pending()

    def hashes_before_seals(self, position: int) -> list[tuple[str, str]]:
        """(receipt id, hash hex) of the chain at `position` before each seal that rewrote it."""
        with self._tx(write=False) as tx:
            return tx.archived_at(position)

    def head(self) -> tuple[int, str]:
        with self._tx(write=False) as tx:
            return tx.head()

    def survey(self, beings: set[UUID] | None, progress: Callable[[int], None] | None = None) -> SealCounts:
        """What a run would rewrite (a dry run: nothing written)."""
        counts = SealCounts()
        after = 0
        while True:
            with self._tx(write=False) as tx:
                rows = tx.candidates(after, BATCH, beings)
            if not rows:
                break
            for row in rows:
                plan = self._plan(*self._row(row), beings)
                if plan is not None:
                    counts.add(self._counted(plan))
            after = int(rows[-1][0])
            if progress is not None:
                progress(after)
        counts.snapshots_dropped = len(self._snapshots_to_drop(beings))
        return counts

    @staticmethod
    def _row(row: tuple[Any, ...]) -> tuple[int, Any, int, str, Any]:
        position, oid, version, topic, state = row
        return int(position), oid, int(version), str(topic), state

    @staticmethod
    def _counted(plan: _Plan) -> SealCounts:
        return SealCounts(
            in_clear=int(plan.was_clear),
            from_being_key=int(not plan.was_clear),
            first_position=plan.position,
            last_position=plan.position,
        )

    def reseal(
        self, scope: str, beings: set[UUID] | None, progress: Callable[[int, int], None] | None = None
    ) -> SealCounts:
        """Rewrite every candidate event, one transaction per batch (see the module's docstring).
        Returns this run's counts (the progress row holds the total of a resumed run)."""
        done = SealCounts()
        after = 0
        top = self.head()[0]
        while True:
            with self._tx(write=True) as tx:
                rows = tx.candidates(after, BATCH, beings)
                if not rows:
                    break
                plans = [p for row in rows if (p := self._plan(*self._row(row), beings)) is not None]
                batch = self._rewrite(tx, plans, scope)
            done.add(batch)
            after = int(rows[-1][0])
            if progress is not None:
                progress(after, max(top, after))
        done.snapshots_dropped = self._drop_snapshots(beings)
        return done

    def _rewrite(self, tx: _Tx, plans: list[_Plan], scope: str) -> SealCounts:
        counts = SealCounts()
        if not plans:
            return counts
        keys, counts.keys_created = self._keys_for(plans)
        nonces = os.urandom(_NONCE * len(plans))
        updates: list[tuple[bytes, int]] = []
        for i, plan in enumerate(plans):
            sealing = keys.get(plan.choice.key_id.int)
            if sealing is None:
                log.warning("keys seal: the chosen key was destroyed, event left", position=plan.position)
                continue
            key, header = sealing
            nonce = nonces[i * _NONCE : (i + 1) * _NONCE]
            state = seal_state(key, header, plan.originator_id, plan.version, plan.topic, plan.clear, nonce)
            updates.append((state, plan.position))
            counts.add(self._counted(plan))
        if not updates:
            return counts
        self.app.keys.settle()  # the batch's new keys on disk before the events that name them
        old_head = tx.head()
        pending = tx.pending()
        # The hashes about to change, kept (ADR 0095): an auditor's checkpoint taken before the seal
        # is checked against them. Batches go up the log, so only a range below the run's is new.
        start = (pending.old_head_position, pending.old_head_hash) if pending else old_head
        first = updates[0][1]  # in position order
        if pending is None or first < pending.first_position:
            tx.archive(str(sealing_receipt_id(*start)), first, pending.first_position if pending else None)
        tx.update(updates)
        assert counts.first_position is not None  # set by the first update counted
        tx.rechain(counts.first_position)
        tx.note_progress(scope, counts, old_head)
        return counts

    def close(self) -> None:
        """The run's receipt is saved: its progress row goes."""
        with self._tx(write=True) as tx:
            tx.clear_progress()

    # -- snapshots ----------------------------------------------------------------------------------

    def _snapshot_recorder(self) -> Any:
        snapshots = getattr(self.app, "snapshots", None)
        return snapshots.recorder if snapshots is not None else None

    def _snapshots_to_drop(self, beings: set[UUID] | None) -> list[tuple[Any, int]]:
        """Snapshots (a cache) that a new write would seal otherwise: dropped, not rewritten."""
        recorder = self._snapshot_recorder()
        if recorder is None:
            return []
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT originator_id, originator_version, topic, state FROM {recorder.events_table_name} "
                    "WHERE substr(state, 1, 4) <> ?",
                    [MAGIC_ITEM],
                )
                rows = [tuple(r) for r in c.fetchall()]
        elif on_postgres(recorder):
            from psycopg.rows import tuple_row

            with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
                curs.execute(
                    f"SELECT originator_id, originator_version, topic, state FROM {pg_events_table(recorder)} "
                    "WHERE substr(state, 1, 4) <> %s".encode(),
                    [MAGIC_ITEM],
                )
                rows = list(curs.fetchall())
        else:
            return []
        return [
            (oid, int(v)) for oid, v, topic, state in rows if self._plan(0, oid, int(v), topic, state, beings)
        ]

    def _drop_snapshots(self, beings: set[UUID] | None) -> int:
        drop = self._snapshots_to_drop(beings)
        recorder = self._snapshot_recorder()
        if not drop:
            return 0
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=True) as c:
                c.executemany(
                    f"DELETE FROM {recorder.events_table_name} WHERE originator_id = ? AND originator_version = ?",
                    [(str(oid), v) for oid, v in drop],
                )
        elif on_postgres(recorder):
            with recorder.datastore.transaction(commit=True) as curs:
                curs.executemany(
                    f"DELETE FROM {pg_events_table(recorder)} "
                    "WHERE originator_id = %s AND originator_version = %s".encode(),
                    [(oid, v) for oid, v in drop],
                )
        return len(drop)

    # -- scrub --------------------------------------------------------------------------------------

    def scrub(self) -> list[str]:
        """The old bytes out of the files, not only out of the rows: SQLite's log file checkpointed,
        VACUUMed (every page written anew) and its WAL truncated; PostgreSQL's events and snapshots
        tables rewritten by `VACUUM FULL` (ADR 0077's way for the views)."""
        recorder = self.app.recorder
        if on_postgres(recorder):
            tables = [pg_events_table(recorder)]
            snap = self._snapshot_recorder()
            if snap is not None and on_postgres(snap):
                tables.append(pg_events_table(snap))
            import psycopg

            kwargs: dict[str, Any] = dict(cast(dict[str, Any], recorder.datastore.pool.kwargs) or {})
            kwargs.pop("row_factory", None)
            with psycopg.connect(autocommit=True, **kwargs) as pg:  # VACUUM runs outside a transaction
                for table in tables:
                    pg.execute(f"VACUUM FULL {table}".encode())
            return tables
        # `keys seal`'s rows were updated in place: VACUUM writes every page of the log anew.
        return vacuum_files(sorted(self.data_dir.glob("events*.sqlite3")), "keys seal", timeout=60)

    # -- transactions -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[_Tx]:
        recorder = self.app.recorder
        if isinstance(recorder, SQLiteAggregateRecorder):
            with recorder.datastore.transaction(commit=write) as c:
                tx: _Tx = _SQLiteTx(c, recorder.events_table_name)
                tx.create(write)
                yield tx
            return
        if on_postgres(recorder):
            from psycopg.rows import tuple_row

            with recorder.datastore.transaction(commit=write) as curs:
                inner = curs.connection.cursor(row_factory=tuple_row)
                tx = _PgTx(inner, recorder)
                tx.create(write)
                yield tx
            return
        raise TypeError(f"no stored log to seal on {type(recorder).__name__}")


class _Tx:
    """The statements of one transaction over the log (SQLite's or PostgreSQL's dialect)."""

    events: str
    hashes: str
    progress: str
    archived: str
    position: str  # the events table's position column
    p = "?"

    def __init__(self, cursor: Any) -> None:
        self.c = cursor

    def run(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> Any:
        self.c.execute(self._sql(sql), params)
        return self.c

    def _sql(self, sql: str) -> Any:
        return sql.replace("?", self.p)

    def create(self, write: bool) -> None:
        raise NotImplementedError

    def candidates(self, after: int, limit: int, beings: set[UUID] | None) -> list[tuple[Any, ...]]:
        """(position, originator id, version, topic, state) of the rows after `after` that may need a
        rewrite: in clear (naming the being), or sealed under a being's key."""
        where = [f"{self.position} > ?"] + ["topic NOT LIKE ?" for _ in _RECEIPT_TOPICS]
        params: list[Any] = [after, *_RECEIPT_TOPICS]
        if beings is not None and len(beings) == 1:
            (being,) = beings
            where.append(f"(({self._not_sealed()} AND {self._contains()}) OR substr(state, 1, 20) = ?)")
            params += [*MAGICS, being.hex.encode(), header_for(being)]
        else:
            where.append(f"({self._not_sealed()} OR substr(state, 1, 4) = ?)")
            params += [*MAGICS, MAGIC]
        rows = self.run(
            f"SELECT {self.position}, originator_id, originator_version, topic, state FROM {self.events} "
            f"WHERE {' AND '.join(where)} ORDER BY {self.position} LIMIT {int(limit)}",
            params,
        ).fetchall()
        return [tuple(r) for r in rows]

    @staticmethod
    def _not_sealed() -> str:
        return "substr(state, 1, 4) NOT IN (?, ?)"

    def _contains(self) -> str:
        return "instr(state, ?) > 0"

    def head(self) -> tuple[int, str]:
        row = self.run(f"SELECT position, hash FROM {self.hashes} ORDER BY position DESC LIMIT 1").fetchone()
        return (int(row[0]), bytes(row[1]).hex()) if row else (0, chain.GENESIS.hex())

    def update(self, updates: list[tuple[bytes, int]]) -> None:
        self.c.executemany(
            self._sql(f"UPDATE {self.events} SET state = ? WHERE {self.position} = ?"), updates
        )

    def rechain(self, start: int) -> None:
        raise NotImplementedError

    def pending(self) -> Pending | None:
        row = self.run(
            "SELECT scope, first_position, last_position, old_head_position, old_head_hash, in_clear, "
            f"from_being_key, snapshots_dropped, keys_created FROM {self.progress}"
        ).fetchone()
        if row is None:
            return None
        names = ("in_clear", "from_being_key", "snapshots_dropped", "keys_created")
        return Pending(
            str(row[0]),
            int(row[1]),
            int(row[2]),
            int(row[3]),
            str(row[4]),
            dict(zip(names, (int(v) for v in row[5:]), strict=True)),
        )

    def note_progress(self, scope: str, counts: SealCounts, old_head: tuple[int, str]) -> None:
        pending = self.pending()
        if pending is None:
            self.run(
                f"INSERT INTO {self.progress} (id, scope, first_position, last_position, old_head_position, "
                "old_head_hash, in_clear, from_being_key, snapshots_dropped, keys_created) "
                "VALUES (1, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                [
                    scope,
                    counts.first_position,
                    counts.last_position,
                    old_head[0],
                    old_head[1],
                    counts.in_clear,
                    counts.from_being_key,
                    counts.keys_created,
                ],
            )
            return
        scopes = sorted({*pending.scope.split(","), scope})
        self.run(
            f"UPDATE {self.progress} SET scope = ?, first_position = ?, last_position = ?, "
            "in_clear = in_clear + ?, from_being_key = from_being_key + ?, keys_created = keys_created + ?",
            [
                "all" if "all" in scopes else ",".join(scopes),
                min(pending.first_position, counts.first_position or pending.first_position),
                max(pending.last_position, counts.last_position or pending.last_position),
                counts.in_clear,
                counts.from_being_key,
                counts.keys_created,
            ],
        )

    def archive(self, receipt: str, low: int, high: int | None) -> None:
        bound = "" if high is None else f" AND position < {int(high)}"
        self.run(
            f"INSERT INTO {self.archived} (receipt, position, hash) SELECT ?, position, hash "
            f"FROM {self.hashes} WHERE position >= ?{bound} ON CONFLICT DO NOTHING",
            [receipt, low],
        )

    def archived_at(self, position: int) -> list[tuple[str, str]]:
        rows = self.run(
            f"SELECT receipt, hash FROM {self.archived} WHERE position = ?", [position]
        ).fetchall()
        return [(str(r[0]), bytes(r[1]).hex()) for r in rows]

    def clear_progress(self) -> None:
        self.run(f"DELETE FROM {self.progress}")

    def _archive_columns(self, blob: str) -> str:
        return (
            f"(receipt TEXT NOT NULL, position BIGINT NOT NULL, hash {blob} NOT NULL, "
            "PRIMARY KEY (receipt, position))"
        )

    def _progress_columns(self) -> str:
        return (
            "(id INTEGER PRIMARY KEY, scope TEXT NOT NULL, first_position BIGINT NOT NULL, "
            "last_position BIGINT NOT NULL, old_head_position BIGINT NOT NULL, old_head_hash TEXT NOT NULL, "
            "in_clear BIGINT NOT NULL, from_being_key BIGINT NOT NULL, snapshots_dropped BIGINT NOT NULL, "
            "keys_created BIGINT NOT NULL)"
        )


class _SQLiteTx(_Tx):
    position = "rowid"

    def __init__(self, cursor: Any, events: str) -> None:
        super().__init__(cursor)
        self.events = events
        self.hashes = chain.HASH_TABLE
        self.progress = PROGRESS_TABLE
        self.archived = ARCHIVE_TABLE

    def create(self, write: bool) -> None:
        # A write first: the transaction holds SQLite's write lock before it reads anything, so the
        # head it hashes up to is the head (another process's insert waits for the commit).
        if write:
            self.run(f"CREATE TABLE IF NOT EXISTS {self.progress} {self._progress_columns()}")
            self.run(f"CREATE TABLE IF NOT EXISTS {self.archived} {self._archive_columns('BLOB')}")
            self.run(chain.sqlite_create_statement())
            self.run(f"DELETE FROM {self.progress} WHERE id <> 1")  # a write, always: takes the lock

    def _exists(self, table: str) -> bool:
        return bool(
            self.run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [table]).fetchone()
        )

    def pending(self) -> Pending | None:
        return super().pending() if self._exists(self.progress) else None

    def archived_at(self, position: int) -> list[tuple[str, str]]:
        return super().archived_at(position) if self._exists(self.archived) else []

    def rechain(self, start: int) -> None:
        self.run(f"DELETE FROM {self.hashes} WHERE position >= ?", [start])
        chain.seal_sqlite(self.c, self.events)


class _PgTx(_Tx):
    position = "notification_id"
    p = "%s"

    def __init__(self, cursor: Any, recorder: Any) -> None:
        super().__init__(cursor)
        self.recorder = recorder
        schema = recorder.datastore.schema
        self.schema = schema
        self.events = pg_events_table(recorder)
        self.hashes = f'"{schema}"."{chain.HASH_TABLE}"' if schema else f'"{chain.HASH_TABLE}"'
        self.progress = f'"{schema}"."{PROGRESS_TABLE}"' if schema else f'"{PROGRESS_TABLE}"'
        self.archived = f'"{schema}"."{ARCHIVE_TABLE}"' if schema else f'"{ARCHIVE_TABLE}"'

    def _sql(self, sql: str) -> Any:
        return cast(Any, sql.replace("?", self.p).encode())

    def _contains(self) -> str:
        return "position(?::bytea in state) > 0"

    def create(self, write: bool) -> None:
        self.run(f"CREATE TABLE IF NOT EXISTS {self.progress} {self._progress_columns()}")
        self.run(f"CREATE TABLE IF NOT EXISTS {self.archived} {self._archive_columns('bytea')}")
        self.run(chain.postgres_create_statement(self.schema))
        if write:  # as the library's insert: writers one after another, readers go on
            self.run(f"LOCK TABLE {self.events} IN EXCLUSIVE MODE")

    def rechain(self, start: int) -> None:
        self.run(f"DELETE FROM {self.hashes} WHERE position >= ?", [start])
        chain.seal_postgres(
            self.c,
            self.schema,
            self.recorder.events_table_name,
            self.recorder.datastore.originator_id_type == "uuid",
        )
