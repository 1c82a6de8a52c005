"""Python's cyclic garbage collector paused while a batch is taken (ADR 0094).

A batch of 500 notes builds thousands of objects that all live until the batch is saved: the
collector's young-generation passes find nothing to free in them, and the full passes they trigger
walk every object of the process (the caches of item keys included). Profiled, that was 11–14 µs a
note of a batch, about as much as item keys added. While a batch is taken the collector is paused;
it runs again when the last batch under way ends. Reference counting frees everything else as
usual, so memory does not grow (measured in ADR 0094): only cycles wait, for the length of one
bounded batch (`MAX_BATCH_NOTES`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # batches under way in this process (any thread)
_resume = False  # whether the collector was on when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the collector for the block; several threads' blocks overlap safely (the last one out
    resumes it), and a collector the host had turned off stays off."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
