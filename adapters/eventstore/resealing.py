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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import structlog
from eventsourcing.sqlite import SQLiteAggregateRecorder
from eventsourcing.utils import resolve_topic

from engram.adapters.eventstore.batch_reads import on_postgres, pg_events_table
from engram.adapters.eventstore.key_choice import KeyChoice, choose_key
from engram.adapters.eventstore.reseal_statements import LogTx, Pending, PostgresTx, SealCounts, SQLiteTx
from engram.adapters.eventstore.shredding import (
    MAGIC,
    MAGIC_ITEM,
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

BATCH = 5000
_NONCE = 12


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
        self._created = False  # SQLite: the tables `keys seal` keeps exist

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

    def _rewrite(self, tx: LogTx, plans: list[_Plan], scope: str) -> SealCounts:
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

    def scrub(self) -> tuple[list[str], bool]:
        """The old bytes out of the files, not only out of the rows: SQLite's log file checkpointed,
        VACUUMed (every page written anew) and its WAL truncated; PostgreSQL's events and snapshots
        tables rewritten by `VACUUM FULL` (ADR 0077's way for the views). Returns what was scrubbed
        and whether that was all (a file another process held is not: run `keys seal` again)."""
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
            return tables, True
        # `keys seal`'s rows were updated in place: VACUUM writes every page of the log anew.
        paths = sorted(self.data_dir.glob("events*.sqlite3"))
        done = vacuum_files(paths, "keys seal", timeout=60)
        return done, len(done) == len(paths)

    # -- transactions -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[LogTx]:
        recorder = self.app.recorder
        if isinstance(recorder, SQLiteAggregateRecorder):
            if not self._created:
                for statement in SQLiteTx(None, recorder.events_table_name).tables():
                    with recorder.datastore.transaction(commit=True) as c:
                        c.execute(statement)
                self._created = True
            with recorder.datastore.transaction(commit=write) as c:
                tx: LogTx = SQLiteTx(c, recorder.events_table_name)
                tx.create(write)
                yield tx
            return
        if on_postgres(recorder):
            from psycopg.rows import tuple_row

            with recorder.datastore.transaction(commit=write) as curs:
                inner = curs.connection.cursor(row_factory=tuple_row)
                tx = PostgresTx(inner, recorder)
                tx.create(write)
                yield tx
            return
        raise TypeError(f"no stored log to seal on {type(recorder).__name__}")
