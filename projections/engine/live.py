"""Live processing: the active generation follows the log, a batch at a time (`process`, the worker's
step) or up to a position (`catch_up`, what a read that needs recent writes runs in-process)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from engram.projections.engine import tracking
from engram.projections.engine.batches import DEFAULT_BATCH, run_batch
from engram.projections.engine.contract import Projection
from engram.projections.engine.source import EventSource
from engram.projections.engine.tracking import ViewMemo
from engram.projections.sql import ViewDatabase

BULK_BACKLOG_BATCHES = 10
"""`catch_up` writes the rest of a backlog in a bulk block when more than this many batches remain."""


def process(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    limit: int = DEFAULT_BATCH,
    memo: ViewMemo | None = None,
    isolating: bool = True,
) -> int:
    """One live batch into the active generation. Returns the number of events applied.

    `memo`: what the caller's process remembers of the view (a fresh one costs a query);
    `isolating`: look for the event a failed batch fails on (batches.py `isolate`) rather than raise.
    """
    count, _ = run_batch(db, projection, source, memo or ViewMemo(), limit=limit, isolating=isolating)
    return count


def catch_up(
    db: ViewDatabase,
    projection: Projection,
    source: EventSource,
    *,
    until: int | None = None,
    limit: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    head: int | None = None,
    memo: ViewMemo | None = None,
) -> int:
    """Process batches until the view reaches `until` (default: the head at the start).

    `head`: the log's head, when the caller has just read it (one query less per view).
    """
    if head is None:
        head = source.head()
    memo = memo or ViewMemo()
    # Never past the head: tracking a position the log has not reached would skip its events.
    target = head if until is None else min(until, head)
    total = 0
    with ExitStack() as stack:
        in_bulk = False
        # A backlog caught up in bulk changed the tables' sizes a lot: their planner statistics
        # follow, on the way out (the generation is read after the block, so it is the serving one).
        stack.push(lambda failed, *_: _analyze_after_bulk(db, projection, in_bulk and failed is None))
        while True:
            count, position = run_batch(db, projection, source, memo, limit=limit, until=target, head=target)
            if count == 0 and position >= target:
                return total
            total += count
            if progress:
                progress(count)
            if position >= target:  # spares a transaction that would only find the view caught up
                return total
            if not in_bulk and target - position > BULK_BACKLOG_BATCHES * limit:
                # A backlog: the rest as a rebuild writes, on a connection of its own whose pages go
                # with it (ADR 0023's addendum). Not for a few batches behind, as a busy worker
                # often is: that connection starts with an empty cache.
                stack.enter_context(db.bulk())
                in_bulk = True


def _analyze_after_bulk(db: ViewDatabase, projection: Projection, bulk: bool) -> bool:
    """After a catch-up that went in bulk and ended well: `ViewDatabase.analyze` of the serving
    generation's tables. Returns False: an exception leaving the block is never swallowed."""
    if bulk:
        with db.read() as conn:
            generation, _ = tracking.active_tracking(conn, db, projection)
        db.analyze([db.table(spec.name, generation) for spec in projection.tables])
    return False
