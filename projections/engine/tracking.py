"""A view's own bookkeeping, in tables of its database: which generation serves, how far each
generation got in the log (and the key of the event there), the last error, and the beings whose
events it holds back (holds.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

from engram.projections.engine.contract import Projection
from engram.projections.sql import ViewConnection, ViewDatabase


def _tables(db: ViewDatabase) -> tuple[str, str, str]:
    """(meta, tracking, holds): one row per view, one per generation, one per held being."""
    return db.table("meta", 0), db.table("tracking", 0), db.table("holds", 0)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def initialise(db: ViewDatabase, projection: Projection) -> None:
    meta, tracking, holds = _tables(db)
    with db.write() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {meta} (name TEXT PRIMARY KEY, active_generation INTEGER NOT NULL, "
            "schema_version INTEGER NOT NULL, last_error TEXT, last_error_at TEXT, error_since TEXT)"
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {tracking} (generation INTEGER PRIMARY KEY, position BIGINT NOT NULL, "
            "updated_at DOUBLE PRECISION NOT NULL, event_key TEXT, held TEXT)"
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {holds} (generation INTEGER NOT NULL, hold_key TEXT NOT NULL, "
            "position BIGINT NOT NULL, resume BIGINT NOT NULL, event_key TEXT, event_type TEXT, "
            "error TEXT NOT NULL, since TEXT NOT NULL, attempts INTEGER NOT NULL, "
            "retry_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (generation, hold_key))"
        )
        # Views made by earlier versions gain the columns added since; NULL until used.
        _add_column(conn, tracking, "event_key")  # ADR 0018
        _add_column(conn, tracking, "held")  # holds.py
        _add_column(conn, meta, "error_since")
        if conn.query_one(f"SELECT name FROM {meta} WHERE name = ?", [projection.name]) is None:
            projection.create_schema(db, conn, 1)
            conn.execute(
                f"INSERT INTO {meta} (name, active_generation, schema_version) VALUES (?, 1, ?)",
                [projection.name, projection.schema_version],
            )
            conn.execute(
                f"INSERT INTO {tracking} (generation, position, updated_at) VALUES (1, 0, ?)", [time.time()]
            )


def _add_column(conn: ViewConnection, table: str, column: str) -> None:
    if conn.dialect == "postgres":
        # Asked first: ALTER TABLE takes an exclusive lock even when the column exists.
        present = conn.query_one(
            "SELECT 1 AS present FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? AND column_name = ?",
            [table, column],
        )
    else:
        present = next((r for r in conn.query(f"PRAGMA table_info({table})") if r["name"] == column), None)
    if present is None:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")


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


@dataclass
class ViewMemo:
    """What a process remembers of one view between batches, to spare queries. Each user of a view
    (`Views`, a rebuild) keeps one; a fresh one only costs the queries it spares."""

    checked: tuple[int, int, str | None] | None = None
    """The (generation, position, key) this process last read from the log or found there: a power
    cut, the only way the log loses events, ends the process too, so a tracking row that still holds
    exactly this was checked already (ADR 0018)."""
    held: frozenset[str] = field(default_factory=frozenset)
    """Whose events the view held back when this process last read its tracking row (holds.py)."""


class Tracked(NamedTuple):
    """A generation's tracking row as a batch reads it."""

    position: int
    key: str | None
    held: frozenset[str]
    failing: bool = False
    """The view's `last_error` is set (a batch that commits clears it)."""


def _held(text: str | None) -> frozenset[str]:
    return frozenset(text.split()) if text else frozenset()


def held_text(held: frozenset[str]) -> str | None:
    return " ".join(sorted(held)) or None


def tracking(conn: ViewConnection, db: ViewDatabase, generation: int) -> Tracked:
    """A generation's tracking row (position 0 and nothing held when it has none)."""
    _, table, _ = _tables(db)
    row = conn.query_one(f"SELECT position, event_key, held FROM {table} WHERE generation = ?", [generation])
    return (
        Tracked(int(row["position"]), row["event_key"], _held(row["held"]))
        if row
        else Tracked(0, None, _HELD0)
    )


_HELD0: frozenset[str] = frozenset()


def active_tracking(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> tuple[int, Tracked]:
    """(active generation, its tracking row) in one query."""
    meta, table, _ = _tables(db)
    row = conn.query_one(
        f"SELECT m.active_generation AS generation, t.position AS position, t.event_key AS event_key, "
        f"t.held AS held, m.last_error AS last_error "
        f"FROM {meta} m LEFT JOIN {table} t ON t.generation = m.active_generation WHERE m.name = ?",
        [projection.name],
    )
    if row is None:
        raise LookupError(f"view {projection.name} is not initialised")
    return int(row["generation"]), Tracked(
        int(row["position"] or 0), row["event_key"], _held(row["held"]), row["last_error"] is not None
    )


def set_tracking(
    conn: ViewConnection,
    db: ViewDatabase,
    generation: int,
    position: int,
    key: str | None,
    held: frozenset[str],
) -> None:
    _, table, _ = _tables(db)
    conn.execute(
        f"UPDATE {table} SET position = ?, updated_at = ?, event_key = ?, held = ? WHERE generation = ?",
        [position, time.time(), key, held_text(held), generation],
    )


def start_generation(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> int:
    """Add a tracking row, at position 0, for the generation after every one there is; its number."""
    _, table, _ = _tables(db)
    current = active_generation(conn, db, projection)
    rows = conn.query(f"SELECT generation FROM {table}")
    new = max([current, *(int(r["generation"]) for r in rows)]) + 1
    conn.execute(
        f"INSERT INTO {table} (generation, position, updated_at) VALUES (?, 0, ?)", [new, time.time()]
    )
    return new


def switch(conn: ViewConnection, db: ViewDatabase, projection: Projection, generation: int) -> None:
    """Make `generation` the one that serves (what the view recorded of the one before goes)."""
    meta, _, _ = _tables(db)
    conn.execute(
        f"UPDATE {meta} SET active_generation = ?, schema_version = ?, last_error = NULL, "
        "last_error_at = NULL, error_since = NULL WHERE name = ?",
        [generation, projection.schema_version, projection.name],
    )


def generations(conn: ViewConnection, db: ViewDatabase) -> list[int]:
    _, table, _ = _tables(db)
    return [int(r["generation"]) for r in conn.query(f"SELECT generation FROM {table}")]


def forget_generation(conn: ViewConnection, db: ViewDatabase, generation: int) -> None:
    _, table, holds = _tables(db)
    conn.execute(f"DELETE FROM {table} WHERE generation = ?", [generation])
    conn.execute(f"DELETE FROM {holds} WHERE generation = ?", [generation])


def lock_out_readers(conn: ViewConnection, db: ViewDatabase) -> None:
    """PostgreSQL: wait for every reader that may have picked an older generation.

    A reader reads the active generation from `meta`, then its tables, in one transaction that holds
    meta's ACCESS SHARE lock until it ends. Waiting for this lock means waiting for every reader that
    may have picked an old generation before the switch, so none of them finds its tables gone.
    (SQLite readers keep their snapshot, dropped tables included.)"""
    if conn.dialect == "postgres":
        meta, _, _ = _tables(db)
        conn.execute(f"LOCK TABLE {meta} IN ACCESS EXCLUSIVE MODE")


def active_generation(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> int:
    meta, _, _ = _tables(db)
    row = conn.query_one(f"SELECT active_generation FROM {meta} WHERE name = ?", [projection.name])
    if row is None:
        raise LookupError(f"view {projection.name} is not initialised")
    return int(row["active_generation"])


def active_position(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> tuple[int, int]:
    """(active generation, its tracked position) in one query."""
    generation, tracked = active_tracking(conn, db, projection)
    return generation, tracked.position


def read_tables(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> dict[str, str]:
    """Physical names of the active generation's tables, for queries."""
    generation = active_generation(conn, db, projection)
    return {spec.name: db.table(spec.name, generation) for spec in projection.tables}


# -- what admins and readers see ------------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """A being whose events a view holds back, from the event at `position` that it could not apply."""

    being: str
    position: int
    event_key: str | None
    event_type: str | None
    error: str
    since: str
    attempts: int
    retry_at: float


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
    error_since: str | None = None
    """When the view first failed in the run of failures that `last_error` ends (None: not failing)."""
    holds: list[Hold] = field(default_factory=list)

    @property
    def needs_rebuild(self) -> bool:
        return self.schema_version != self.code_schema_version


def holds_of(conn: ViewConnection, db: ViewDatabase, generation: int) -> list[Hold]:
    _, _, table = _tables(db)
    rows = conn.query(
        f"SELECT hold_key, position, event_key, event_type, error, since, attempts, retry_at FROM {table} "
        "WHERE generation = ? ORDER BY position",
        [generation],
    )
    return [
        Hold(
            r["hold_key"],
            int(r["position"]),
            r["event_key"],
            r["event_type"],
            r["error"],
            r["since"],
            int(r["attempts"]),
            float(r["retry_at"]),
        )
        for r in rows
    ]


def status(db: ViewDatabase, projection: Projection) -> ViewStatus:
    meta, table, _ = _tables(db)
    with db.read() as conn:
        row = conn.query_one(f"SELECT * FROM {meta} WHERE name = ?", [projection.name])
        assert row is not None, "initialise() first"
        positions = {int(r["generation"]): int(r["position"]) for r in conn.query(f"SELECT * FROM {table}")}
        gen = int(row["active_generation"])
        holds = holds_of(conn, db, gen)
    return ViewStatus(
        name=projection.name,
        generation=gen,
        position=positions.get(gen, 0),
        schema_version=int(row["schema_version"]),
        code_schema_version=projection.schema_version,
        last_error=row["last_error"],
        last_error_at=row["last_error_at"],
        building={g: p for g, p in positions.items() if g > gen},
        error_since=row["error_since"],
        holds=holds,
    )


class ViewPosition(NamedTuple):
    position: int
    needs_rebuild: bool
    held: frozenset[str]


def position(db: ViewDatabase, projection: Projection) -> ViewPosition:
    """The active generation's position, whether the view needs a rebuild, and whose events it holds
    back: `status` in one query."""
    meta, table, _ = _tables(db)
    with db.read() as conn:
        row = conn.query_one(
            f"SELECT t.position AS position, t.held AS held, m.schema_version AS schema_version FROM {meta} m "
            f"LEFT JOIN {table} t ON t.generation = m.active_generation WHERE m.name = ?",
            [projection.name],
        )
    assert row is not None, "initialise() first"
    return ViewPosition(
        int(row["position"] or 0), int(row["schema_version"]) != projection.schema_version, _held(row["held"])
    )


def record_error(db: ViewDatabase, projection: Projection, error: str | None) -> None:
    """Record why the view stopped (None: it goes again). `error_since` keeps the first failure."""
    meta, _, _ = _tables(db)
    with db.write() as conn:
        if error is None:
            conn.execute(
                f"UPDATE {meta} SET last_error = NULL, last_error_at = NULL, error_since = NULL WHERE name = ?",
                [projection.name],
            )
        else:
            at = now_iso()
            conn.execute(
                f"UPDATE {meta} SET last_error = ?, last_error_at = ?, error_since = COALESCE(error_since, ?) "
                "WHERE name = ?",
                [error, at, at, projection.name],
            )


def clear_error(conn: ViewConnection, db: ViewDatabase, projection: Projection) -> None:
    meta, _, _ = _tables(db)
    conn.execute(
        f"UPDATE {meta} SET last_error = NULL, last_error_at = NULL, error_since = NULL WHERE name = ?",
        [projection.name],
    )


def holds_table(db: ViewDatabase) -> str:
    return _tables(db)[2]


HOLD_RETRY_S = 60.0
"""A held being's events are tried again this long after the hold, then ever less often (holds.py)."""

HOLD_RETRY_MAX_S = 3600.0


def record_hold(conn: ViewConnection, db: ViewDatabase, generation: int, hold: Hold) -> None:
    conn.execute(
        f"INSERT INTO {holds_table(db)} (generation, hold_key, position, resume, event_key, event_type, "
        "error, since, attempts, retry_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            generation,
            hold.being,
            hold.position,
            hold.position,
            hold.event_key,
            hold.event_type,
            hold.error,
            hold.since,
            hold.attempts,
            hold.retry_at,
        ],
    )
