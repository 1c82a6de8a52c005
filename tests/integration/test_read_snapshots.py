"""`ReadModels.snapshot` holds a read transaction for the thread that opened it, and for no other.

`engram.views.read` hands out a new `ReadModels` per call, but one kept and shared by threads (a
service embedding Engram may) must not hand a snapshot held on one thread, or its connection, to a
read on another.
"""

from __future__ import annotations

import threading

from engram.services.bootstrap import Engram


def test_a_snapshot_is_the_opening_threads_only(engram: Engram) -> None:
    engram.beings.register("aria")
    engram.views.ensure()
    read = engram.views.read
    held, release = threading.Event(), threading.Event()
    seen_inside: list[object] = []

    def hold() -> None:
        with read.snapshot("beings") as snapshot:
            held.set()
            release.wait(timeout=30)
            seen_inside.append(snapshot.being_by_name("bob"))

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=30)
        engram.beings.register("bob")
        engram.views.ensure()
        # This thread's reads see the new being: they do not run in the other thread's snapshot.
        bob = read.being_by_name("bob")
        assert bob is not None and bob["name"] == "bob"
        with read.snapshot("beings") as mine:
            assert mine.being_by_name("bob") is not None
    finally:
        release.set()
        holder.join(timeout=30)
    # ...and the holder's snapshot stayed what it was when it opened.
    assert seen_inside == [None]
    assert read.being_by_name("aria") is not None
