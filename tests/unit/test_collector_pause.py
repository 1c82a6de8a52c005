"""The collector paused while a batch is taken (ADR 0094)."""

from __future__ import annotations

import gc
import threading

import pytest

from engram.services.collector_pause import collector_paused


def test_the_collector_is_paused_in_a_batch_and_resumed_after_even_on_error() -> None:
    seen: list[bool] = []

    def refused_batch() -> None:
        with collector_paused():
            seen.append(gc.isenabled())
            raise RuntimeError("a batch refused")

    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        refused_batch()
    assert seen == [False] and gc.isenabled()


def test_overlapping_batches_resume_it_when_the_last_ends_and_a_host_choice_stands() -> None:
    inside, leave = threading.Event(), threading.Event()

    def other_batch() -> None:
        with collector_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other_batch)
    with collector_paused():
        thread.start()
        inside.wait(5)
    assert not gc.isenabled()  # the other thread's batch is still under way
    leave.set()
    thread.join(5)
    assert gc.isenabled()
    gc.disable()  # the host's choice
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
