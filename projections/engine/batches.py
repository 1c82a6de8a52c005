"""One batch: the events after a generation's position, applied and tracked in one transaction.

Every way events reach a view (the live runner, a read's catch-up, a rebuild) goes through here.
A batch's rows and its tracking position commit together, so every event is applied exactly once,
also when the process is killed mid-batch. When a batch fails, `isolate` looks for the one event
that fails on its own and holds back its being's events in the view (ADR 0031), so that one event
that cannot be applied never stops every other being's view.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from engram.domain.errors import DomainError
from engram.projections.engine import tracking
from engram.projections.engine.contract import Batch, Projection
from engram.projections.engine.rows import RowCache
from engram.projections.engine.source import EventSource, event_key
from engram.projections.engine.tracking import Hold, LogDiverged, Tracked, ViewMemo
from engram.projections.sql import ViewConnection, ViewDatabase
from engram.projections.vector_index import ServiceUnavailable

log = structlog.get_logger("engram.projections")

DEFAULT_BATCH = 500


@dataclass(frozen=True)
class Step:
    """What one batch does: apply `events` (this view's, after `start`) and track `position`."""

    generation: int
    start: int
    events: Sequence[tuple[int, Any]]
    position: int
    key: str | None
    held: frozenset[str]


def next_step(
    conn: ViewConnection,
    projection: Projection,
    source: EventSource,
    memo: ViewMemo,
    generation: int,
    tracked: Tracked,
    limit: int,
    head: int | None = None,
) -> Step | None:
    """Up to `limit` events after the generation's position, and where they take it; None when the
    view has seen the log up to `head` (default: the log's head, read now).

    Raises `LogDiverged` when the log no longer holds the event the view applied at its position.
    """
    position, tracked_key = tracked.position, tracked.key
    reuses = source.reuses_positions
    checked = (generation, position, tracked_key)
    if reuses and tracked_key is not None and position > 0 and memo.checked != checked:
        found = source.key_at(position)
        if found != tracked_key:
            raise LogDiverged(
                projection.name, position, f"{found or 'no event'} where it applied {tracked_key}"
            )
        memo.checked = checked
    # Read the head first: if fewer than `limit` matching events come back, the view has seen
    # everything up to that head, also the events of topics it does not handle.
    if head is None:
        head = source.head()
        if head < position:  # the log ends before what the view applied
            raise LogDiverged(projection.name, position, f"the log ends at {head}")
    if head <= position:
        return None
    events = source.decoded_events(position + 1, limit, projection.topics, stop=head)
    new_position = head if len(events) < limit else events[-1][0]
    new_key: str | None = None
    if events and events[-1][0] == new_position:
        new_key = event_key(events[-1][1].originator_id, events[-1][1].originator_version)
    elif reuses:
        new_key = source.key_at(new_position)
    if reuses and new_key is not None:
        # This process read that key from the log itself: the next batch need not read it again.
        # (Were this transaction rolled back, the row would not match and the check would run.)
        memo.checked = (generation, new_position, new_key)
    return Step(generation, position, events, new_position, new_key, tracked.held)


def write_events(
    conn: ViewConnection,
    db: ViewDatabase,
    projection: Projection,
    generation: int,
    events: Sequence[tuple[int, Any]],
    *,
    active: bool,
    caches: dict[str, RowCache] | None = None,
) -> None:
    """Apply events to the generation's rows: handlers, `before_commit`, the rows written (narrow
    updates, then whole rows), `after_flush`. `caches` are kept from batch to batch by a rebuild; by
    default the batch starts with empty ones."""
    if caches is None:
        caches = {spec.name: RowCache(spec, db.table(spec.name, generation)) for spec in projection.tables}
    batch = Batch(conn=conn, caches=caches, generation=generation, active=active)
    projection.apply(batch, events)
    projection.before_commit(batch)
    for cache in caches.values():
        cache.write_narrow(conn)
        cache.flush(conn)
    projection.after_flush(batch)


def write_step(
    conn: ViewConnection,
    db: ViewDatabase,
    projection: Projection,
    step: Step,
    *,
    active: bool,
    caches: dict[str, RowCache] | None = None,
    hold: Hold | None = None,
    clear_error: bool = False,
) -> None:
    """Apply the step's events, except those of held beings, and track its position; `hold`: record
    that being's hold in the same transaction."""
    held = step.held
    if hold is not None:
        tracking.record_hold(conn, db, step.generation, hold)
        held = held | {hold.being}
    events = step.events
    if held:
        key = projection.hold_key
        events = [e for e in events if key(e[1]) not in held]
    write_events(conn, db, projection, step.generation, events, active=active, caches=caches)
    tracking.set_tracking(conn, db, step.generation, step.position, step.key, held)
    if clear_error:
        tracking.clear_error(conn, db, projection)


def run_batch(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    memo: ViewMemo,
    *,
    limit: int,
    generation: int | None = None,
    until: int | None = None,
    head: int | None = None,
    isolating: bool = True,
) -> tuple[int, int]:
    """One batch in one transaction into `generation` (default: the active one), unless the view
    reached `until` already; returns (events seen, the position reached).

    `head`: a log position already committed, when the caller knows it. A failed batch is rolled
    back; with `isolating`, its events are then applied in smaller transactions (`isolate`). A failure
    of the active generation that stops the view is recorded in it (`projections status`).
    """
    step: Step | None = None
    active = generation is None
    try:
        with db.write() as conn:
            if generation is None:
                generation, tracked = tracking.active_tracking(conn, db, projection)
            else:
                tracked = tracking.tracking(conn, db, generation)
            memo.held = tracked.held
            if until is not None and tracked.position >= until:
                return 0, tracked.position
            step = next_step(conn, projection, source, memo, generation, tracked, limit, head)
            if step is None:
                if active and tracked.failing:  # it went again: no error to show any more
                    tracking.clear_error(conn, db, projection)
                return 0, tracked.position
            write_step(conn, db, projection, step, active=active, clear_error=active and tracked.failing)
        return len(step.events), step.position
    except Exception as exc:
        failure = exc
        if step is not None and isolating and may_be_the_events(exc):
            try:
                return len(step.events), isolate(db, projection, step, exc, memo, active=active)
            except Exception as again:
                failure = again
        if active:
            _record(db, projection, failure)
        if failure is exc:
            raise
        raise failure from exc


def may_be_the_events(exc: Exception) -> bool:
    """Whether a failed batch may have failed for one of its events, rather than for what it runs on:
    a log that lost events, an outside store that is unavailable."""
    if _disk_full(exc):  # the view waits for space; nobody is held
        return False
    return not isinstance(exc, LogDiverged | ServiceUnavailable | MemoryError)


def _disk_full(exc: BaseException) -> bool:
    """The services' `StorageFull` (ADR 0030), known here by its code: projections import no service."""
    return isinstance(exc, DomainError) and exc.code == "storage_full"


def reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _record(db: ViewDatabase, projection: Projection, exc: Exception) -> None:
    try:
        tracking.record_error(db, projection, reason(exc))
    except Exception:  # the view database itself may be what failed
        if not _disk_full(exc):  # a full disk was said already, by the worker
            log.warning("could not record the error in the view", view=projection.name, exc_info=True)


@dataclass
class _Progress:
    """How far an isolation got: the position it committed last, the beings held by then."""

    at: int
    held: frozenset[str]


class _Moved(RuntimeError):
    """Another writer moved the generation on while a failed batch was being isolated."""


def isolate(
    db: ViewDatabase, projection: Projection, step: Step, error: Exception, memo: ViewMemo, *, active: bool
) -> int:
    """Apply a failed step's events in smaller transactions, halving the failing ones, until one event
    fails on its own. Such an event fails once more alone before its being's events are held back in
    this view (`holds.py`): the hold is recorded with the transaction that applies the step's other
    events, and only if that one commits. First of all an empty batch must commit: a store that fails
    whatever it is given holds nobody. Raises what made the step fail when it fails for another
    reason. Returns the position reached.
    """
    log.warning(
        "a batch failed; applying its events in smaller batches to find the one that fails",
        view=projection.name,
        position=step.start,
        events=len(step.events),
        reason=reason(error),
    )
    state = _Progress(step.start, step.held)

    def attempt(
        events: Sequence[tuple[int, Any]], position: int | None, key: str | None, hold: Hold | None = None
    ) -> None:
        """The events in one transaction, up to `position` (None: an empty batch where the view is)."""
        with db.write() as conn:
            current = (
                tracking.active_tracking(conn, db, projection)[1]
                if active
                else tracking.tracking(conn, db, step.generation)
            )
            if current.position != state.at:
                raise _Moved(f"view {projection.name} moved to {current.position} meanwhile")
            if position is None:
                position, key = current.position, current.key
            part = Step(step.generation, current.position, events, position, key, current.held)
            write_step(
                conn, db, projection, part, active=active, hold=hold, clear_error=active and current.failing
            )
        state.at = position
        state.held = memo.held = part.held | ({hold.being} if hold else frozenset())

    def failure(events: Sequence[tuple[int, Any]], position: int, key: str | None) -> Exception | None:
        """None when the events commit, else why they did not (an error not theirs raises)."""
        try:
            attempt(events, position, key)
        except _Moved:
            raise
        except Exception as exc:
            if not may_be_the_events(exc):
                raise
            return exc
        return None

    def settle(events: Sequence[tuple[int, Any]], position: int, key: str | None) -> None:
        failed = failure(events, position, key)
        if failed is None:
            return
        live = [e for e in events if projection.hold_key(e[1]) not in state.held]
        if not live:
            raise failed
        if len(live) > 1:
            mid = len(events) // 2
            last = events[mid - 1]
            settle(events[:mid], last[0], event_key(last[1].originator_id, last[1].originator_version))
            settle(events[mid:], position, key)
            return
        failed = failure(
            events, position, key
        )  # once more: a failure that does not come back was not its own
        if failed is None:
            return
        culprit_position, culprit = live[0]
        hold = Hold(
            being=projection.hold_key(culprit),
            position=culprit_position,
            event_key=event_key(culprit.originator_id, culprit.originator_version),
            event_type=type(culprit).__qualname__,
            error=reason(failed)[:2000],
            since=tracking.now_iso(),
            attempts=1,
            retry_at=time.time() + tracking.HOLD_RETRY_S,
        )
        attempt(events, position, key, hold)
        log.error(
            "a view holds back a being's events: one of them cannot be applied",
            view=projection.name,
            being_id=hold.being,
            position=hold.position,
            event_type=hold.event_type,
            reason=hold.error,
        )

    # A store that fails whatever it is given fails an empty batch too: then no event is to blame.
    attempt([], None, None)
    settle(step.events, step.position, step.key)
    return step.position
