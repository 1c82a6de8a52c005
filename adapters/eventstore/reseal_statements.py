# ruff: noqa: S608  (table names from the library's recorders, values as parameters)
"""The statements of `keys seal` (ADR 0095) on each backend, within one transaction: the candidate
rows, the rows' update, the chain hashed again, the progress row of a run and the hashes a seal
replaced (kept for checkpoints taken before it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from engram.adapters.eventstore import chain
from engram.adapters.eventstore.batch_reads import pg_events_table
from engram.adapters.eventstore.shredding import MAGIC, MAGICS, header_for

PROGRESS_TABLE = "engram_key_sealing"
ARCHIVE_TABLE = "engram_resealed_hashes"
"""The chain's hashes as they were before a seal rewrote them: (receipt id, position, hash)."""
_RECEIPT_TOPICS = ("engram.Erasure.%", "engram.KeySealing.%")  # in clear by design (ADR 0073, 0095)


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


class LogTx:
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

    def tables(self) -> list[str]:
        """The statements that create the tables `keys seal` keeps (none on PostgreSQL: `create`)."""
        return []

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


class SQLiteTx(LogTx):
    position = "rowid"

    def __init__(self, cursor: Any, events: str) -> None:
        super().__init__(cursor)
        self.events = events
        self.hashes = chain.HASH_TABLE
        self.progress = PROGRESS_TABLE
        self.archived = ARCHIVE_TABLE

    def tables(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.progress} {self._progress_columns()}",
            f"CREATE TABLE IF NOT EXISTS {self.archived} {self._archive_columns('BLOB')}",
            chain.sqlite_create_statement(),
        ]

    def create(self, write: bool) -> None:
        # A write first: the transaction takes SQLite's write lock before it reads anything (a read
        # first would pin a snapshot, and another process's commit after it would make the upgrade
        # fail at once with "database is locked"), so the head it hashes up to is the head. The
        # tables exist already (`tables`, each in a transaction of its own).
        if write:
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


class PostgresTx(LogTx):
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
