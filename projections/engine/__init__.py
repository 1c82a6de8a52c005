"""Tracked, resumable, rebuildable projections of the event log.

Each projection owns one view database. Its rows and its tracking position are written in the same
transaction, so every event is applied exactly once, also when the process is killed mid-batch.
Tables belong to a *generation*: live processing writes the active one; a rebuild fills the next one
from position 0 while the active one keeps serving reads, then switches the pointer in the same
transaction that applies the last events (blue-green).

Where things are:
- `contract.py`: what a projection declares and what its handlers see (`Projection`, `Batch`);
- `source.py`: the log as projections read it (`EventSource`), one read shared by several views;
- `rows.py`: a batch's rows in memory and how they are written (narrow updates, upserts, COPY);
- `tracking.py`: the view's bookkeeping (active generation, positions, errors, holds) and its status;
- `batches.py`: one batch in one transaction, and finding the event a failed batch fails on;
- `live.py`: the active generation following the log (the worker's step, a read's catch-up);
- `holds.py`: beings whose events a view holds back after one failed, and trying them again;
- `rebuilding.py`: blue-green rebuilds, alone or several views in one pass, and what they leave behind;
- `collector.py`: the garbage collector's thresholds while writing in bulk.
"""

from engram.projections.engine.batches import DEFAULT_BATCH
from engram.projections.engine.collector import fewer_gc_passes
from engram.projections.engine.contract import Batch, Handler, Projection, handles
from engram.projections.engine.holds import Retried
from engram.projections.engine.live import catch_up, process
from engram.projections.engine.rebuilding import (
    REBUILD_BATCH,
    collect_garbage,
    drop_generations,
    rebuild,
    rebuild_many,
)
from engram.projections.engine.source import EventSource, SharedRead, event_key, shared_read
from engram.projections.engine.tracking import (
    Hold,
    LogDiverged,
    ViewMemo,
    ViewPosition,
    ViewStatus,
    active_generation,
    active_position,
    initialise,
    position,
    read_tables,
    record_error,
    status,
)

__all__ = [
    "DEFAULT_BATCH",
    "REBUILD_BATCH",
    "Batch",
    "EventSource",
    "Handler",
    "Hold",
    "LogDiverged",
    "Projection",
    "Retried",
    "SharedRead",
    "ViewMemo",
    "ViewPosition",
    "ViewStatus",
    "active_generation",
    "active_position",
    "catch_up",
    "collect_garbage",
    "drop_generations",
    "event_key",
    "fewer_gc_passes",
    "handles",
    "initialise",
    "position",
    "process",
    "read_tables",
    "rebuild",
    "rebuild_many",
    "record_error",
    "shared_read",
    "status",
]
