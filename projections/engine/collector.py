"""The cyclic garbage collector, made to run less often while a process writes in bulk."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLD_BULK = 100_000
"""The collector's first threshold while a rebuild loads (Python's default is 700 allocations)."""

_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, ...] = ()


@contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """Run the cyclic garbage collector less often while a rebuild loads a generation, or patrol
    changes nodes in bulk.

    A bulk load allocates millions of objects (decoded events, rows) and keeps hundreds of thousands
    alive (the row caches); the collector's default thresholds then traverse the caches again and
    again, a sixth of a rebuild's CPU time. A patrol step that loads, changes and saves a thousand
    nodes keeps tens of thousands alive long enough to be promoted, which sets off a full collection
    (~0.1 s) every other patrol. Those objects form no cycles and are freed by reference counting:
    collections only happen less often, for the whole process, until the last user leaves. The
    thresholds are the process's own, so the count of users is too.
    """
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            first, *rest = _gc_saved
            gc.set_threshold(max(first, GC_THRESHOLD_BULK), *rest)
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0:
                gc.set_threshold(*_gc_saved)
