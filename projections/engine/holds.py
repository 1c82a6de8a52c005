"""Beings whose events a view holds back, and applying them again (ADR 0031).

When a batch fails because of one event (batches.py `isolate`), the view records a hold for that
event's being: the event's position, key and type, the error, when it was first seen. The view then
goes on with every other being's events and leaves that being's out (its rows stay as they were
before the event), and reads of that being say that the view holds it back. Trying again applies the
being's events from the held one up to the view's position, in log order, in batches whose rows and
progress commit together; the hold goes with the last of them. The worker tries again by itself, after
`HOLD_RETRY_S` and ever less often; `engram projections retry` asks for it now; a rebuild starts over
without the holds of the generation it replaces.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from engram.projections.engine import tracking
from engram.projections.engine.batches import DEFAULT_BATCH, reason, write_events
from engram.projections.engine.contract import Projection
from engram.projections.engine.source import EventSource
from engram.projections.engine.tracking import HOLD_RETRY_MAX_S, HOLD_RETRY_S, ViewMemo
from engram.projections.sql import ViewDatabase

log = structlog.get_logger("engram.projections")


@dataclass(frozen=True)
class Retried:
    being: str
    released: bool
    error: str | None = None


def due(db: ViewDatabase, projection: Projection, *, now: float | None = None) -> list[str]:
    """The held beings of the active generation whose next try is due."""
    with db.read() as conn:
        generation = tracking.active_generation(conn, db, projection)
        rows = conn.query(
            f"SELECT hold_key FROM {tracking.holds_table(db)} WHERE generation = ? AND retry_at <= ? "
            "ORDER BY position",
            [generation, time.time() if now is None else now],
        )
    return [r["hold_key"] for r in rows]


def request_retry(db: ViewDatabase, projection: Projection, beings: Iterable[str] | None = None) -> int:
    """Make the holds of `beings` (default: all) due now, for the process that runs the view (the
    worker) to try them again; returns how many."""
    with db.write() as conn:
        generation = tracking.active_generation(conn, db, projection)
        keys = [h.being for h in tracking.holds_of(conn, db, generation)]
        wanted = [k for k in keys if beings is None or k in set(beings)]
        for key in wanted:
            conn.execute(
                f"UPDATE {tracking.holds_table(db)} SET retry_at = 0 WHERE generation = ? AND hold_key = ?",
                [generation, key],
            )
    return len(wanted)


def retry(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    memo: ViewMemo,
    beings: Iterable[str],
    *,
    limit: int = DEFAULT_BATCH,
) -> list[Retried]:
    """Apply the held events of `beings` again. The caller holds the view's processing lock (no
    batch of the view runs meanwhile). A being whose events apply is released; one whose events fail
    again stays held, its error and next try updated."""
    out = []
    for being in beings:
        try:
            _replay(db, projection, source, memo, being, limit)
        except Exception as exc:
            _failed_again(db, projection, being, reason(exc))
            log.warning("held events still fail", view=projection.name, being_id=being, reason=reason(exc))
            out.append(Retried(being, False, reason(exc)))
            continue
        log.info("held events applied; hold released", view=projection.name, being_id=being)
        out.append(Retried(being, True))
    return out


def _replay(
    db: ViewDatabase, projection: Projection, source: EventSource, memo: ViewMemo, being: str, limit: int
) -> None:
    key = projection.hold_key
    holds = tracking.holds_table(db)
    while True:
        with db.write() as conn:
            generation, tracked = tracking.active_tracking(conn, db, projection)
            row = conn.query_one(
                f"SELECT resume FROM {holds} WHERE generation = ? AND hold_key = ?", [generation, being]
            )
            if row is None:
                return  # released meanwhile (or the view was rebuilt)
            start, until = int(row["resume"]), tracked.position
            events = (
                source.decoded_events(start, limit, projection.topics, stop=until) if start <= until else []
            )
            reached = until if len(events) < limit else events[-1][0]
            write_events(
                conn, db, projection, generation, [e for e in events if key(e[1]) == being], active=True
            )
            if reached < until:
                conn.execute(
                    f"UPDATE {holds} SET resume = ? WHERE generation = ? AND hold_key = ?",
                    [reached + 1, generation, being],
                )
                continue
            conn.execute(f"DELETE FROM {holds} WHERE generation = ? AND hold_key = ?", [generation, being])
            memo.held = tracked.held - {being}
            tracking.set_tracking(conn, db, generation, tracked.position, tracked.key, memo.held)
            return


def _failed_again(db: ViewDatabase, projection: Projection, being: str, error: str) -> None:
    holds = tracking.holds_table(db)
    with db.write() as conn:
        generation = tracking.active_generation(conn, db, projection)
        row = conn.query_one(
            f"SELECT attempts FROM {holds} WHERE generation = ? AND hold_key = ?", [generation, being]
        )
        if row is None:
            return
        attempts = int(row["attempts"]) + 1
        wait = min(HOLD_RETRY_S * 2 ** (attempts - 1), HOLD_RETRY_MAX_S)
        conn.execute(
            f"UPDATE {holds} SET attempts = ?, error = ?, retry_at = ? WHERE generation = ? AND hold_key = ?",
            [attempts, error[:2000], time.time() + wait, generation, being],
        )
