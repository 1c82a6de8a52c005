"""`Overlap` runs a read's statements on a worker while the caller works (ADR 0017)."""

from __future__ import annotations

import threading

import pytest

from engram.projections.fulltext.overlap import Overlap


def test_jobs_run_in_order_on_a_worker_while_the_caller_works() -> None:
    overlap = Overlap(workers=1)
    caller = threading.get_ident()
    seen: list[tuple[str, int]] = []
    worker_started = threading.Event()
    caller_done = threading.Event()

    def job(name: str) -> str:
        seen.append((name, threading.get_ident()))
        if name == "first":
            worker_started.set()
            # The caller's work runs meanwhile: it sets this before the worker goes on.
            assert caller_done.wait(timeout=10)
        return name.upper()

    def alongside() -> str:
        assert worker_started.wait(timeout=10), "the worker starts before the caller's work"
        caller_done.set()
        return "vectors"

    results, other = overlap.run([lambda: job("first"), lambda: job("second")], alongside)
    assert results == ["FIRST", "SECOND"] and other == "vectors"
    assert [name for name, _ in seen] == ["first", "second"]
    assert all(thread != caller for _, thread in seen)
    assert (overlap.overlapped, overlap.inline) == (1, 0)
    overlap.close()


def test_the_caller_waits_for_the_jobs_even_when_its_own_work_fails() -> None:
    overlap = Overlap(workers=1)
    finished = threading.Event()
    release = threading.Event()

    def job() -> int:
        release.wait(timeout=10)
        finished.set()
        return 1

    def failing() -> None:
        release.set()
        raise ValueError("vector search failed")

    with pytest.raises(ValueError, match="vector search failed"):
        overlap.run([job], failing)
    # The jobs hold the caller's connection: run returns (or raises) only once they are done.
    assert finished.is_set()
    overlap.close()


def test_a_failing_job_fails_the_call() -> None:
    overlap = Overlap(workers=1)

    def job() -> int:
        raise RuntimeError("statement failed")

    with pytest.raises(RuntimeError, match="statement failed"):
        overlap.run([job], lambda: "done")
    # The worker slot was given back.
    assert overlap.run([lambda: 2], lambda: 3) == ([2], 3)
    overlap.close()


def test_with_every_worker_busy_the_jobs_run_on_the_caller() -> None:
    overlap = Overlap(workers=1)
    inside, release = threading.Event(), threading.Event()
    threads: list[int] = []

    def record() -> int:
        threads.append(threading.get_ident())
        return 5

    def slow() -> int:
        inside.set()
        release.wait(timeout=10)
        return 0

    holder = threading.Thread(target=lambda: overlap.run([slow], lambda: None))
    holder.start()
    try:
        assert inside.wait(timeout=10)
        results, other = overlap.run([record], lambda: 6)
        assert (results, other) == ([5], 6)
        assert threads == [threading.get_ident()]
        assert overlap.inline == 1
    finally:
        release.set()
        holder.join(timeout=10)
    overlap.close()


def test_no_jobs_is_just_the_callers_work() -> None:
    overlap = Overlap()
    assert overlap.run([], lambda: "only") == ([], "only")
    assert overlap.overlapped == 0
