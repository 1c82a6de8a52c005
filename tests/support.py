"""Test doubles for the nondeterministic ports (clock, ids) and backend helpers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.scratch import scratch_schema


class SteppingClock:
    """Advances by one second each time it is read, so events get distinct, predictable instants."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(seconds=1)) -> None:
        self.current = start or datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
        self.step = step

    def now(self) -> datetime:
        value = self.current
        self.current += self.step
        return value


class SeededIds:
    def __init__(self, seed: int = 0) -> None:
        self.counter = seed

    def new_id(self) -> uuid.UUID:
        self.counter += 1
        return uuid.UUID(int=(0xE0 << 120) | self.counter)


def postgres_url() -> str | None:
    return os.environ.get("ENGRAM_TEST_DATABASE_URL")


def require_postgres() -> str:
    """The test cluster's URL. Without one, CI fails the test and a developer machine skips it."""
    url = postgres_url()
    if url is None:
        if os.environ.get("CI"):
            pytest.fail("CI must provide PostgreSQL: ENGRAM_TEST_DATABASE_URL is not set")
        # Developer machines without PostgreSQL still run the SQLite half of every contract test.
        pytest.skip("ENGRAM_TEST_DATABASE_URL not set (scripts/test.sh starts a cluster)")
    return url


@contextmanager
def postgres_schema(base_url: str) -> Iterator[str]:
    """A fresh schema for one test, dropped afterwards; yields a database URL that selects it."""
    with scratch_schema(base_url, prefix="t_") as url:
        yield url


@contextmanager
def fresh_settings(backend: str, root: os.PathLike[str] | str, **overrides: object) -> Iterator[object]:
    """Settings on a database of their own (a new directory, or a new PostgreSQL schema)."""
    from pathlib import Path

    from engram.services.config import Settings

    data_dir = Path(root) / uuid.uuid4().hex
    base = {"data_dir": data_dir, "embedder": "hashing", "llm": "none", **overrides}
    if backend == "postgres":
        url = postgres_url()
        assert url, "ENGRAM_TEST_DATABASE_URL is not set"
        with postgres_schema(url) as scoped:
            yield Settings(database_url=scoped, **base)  # type: ignore[arg-type]
    else:
        yield Settings(**base)  # type: ignore[arg-type]


ROOT = Path(__file__).resolve().parents[1]


def settings_json(settings: Any) -> str:
    """`Settings` as JSON for a child process, secrets included (the child's own settings)."""
    data = json.loads(settings.model_dump_json())
    if settings.database_url is not None:
        data["database_url"] = settings.database_url.get_secret_value()
    return json.dumps(data)


def sigkill_after_batches(module: str, settings: Any, after: int, *args: str) -> int:
    """Run `python -m module <settings> *args`, SIGKILL it once it has reported `after` committed
    batches (lines starting with "batch"), and return how many it reported."""
    child = subprocess.Popen(
        [sys.executable, "-m", module, settings_json(settings), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    seen = 0
    for line in child.stdout:
        if line.startswith("batch"):
            seen += 1
            if seen >= after:
                os.kill(child.pid, signal.SIGKILL)  # lands inside the next batch
                break
        if line.startswith("done"):
            break
    child.wait(timeout=60)
    return seen


def hold_first_save(engram: Any, barrier: Any) -> None:
    """The first save of `engram`'s store waits until the other writer is about to save too: both
    have read what they read before either writes (the races of two writers, forced)."""
    import threading

    save = engram.store.save
    held = threading.Event()

    def waiting_save(*aggregates: Any, **kwargs: Any) -> int | None:
        if not held.is_set():
            held.set()
            barrier.wait()
        result: int | None = save(*aggregates, **kwargs)
        return result

    engram.store.save = waiting_save


def race(first: Any, second: Any, act: Any) -> tuple[Any, Any]:
    """`act(engram, name)` run at once on two Engrams over one store, each first save held until both
    are about to save (`hold_first_save`); returns what each returned, or the exception it raised."""
    import threading

    barrier = threading.Barrier(2, timeout=30)
    results: dict[str, Any] = {}
    for e in (first, second):
        hold_first_save(e, barrier)

    def run(name: str, e: Any) -> None:
        try:
            results[name] = act(e, name)
        except Exception as exc:  # handed back to the test, which reports it
            results[name] = exc

    threads = [threading.Thread(target=run, args=(n, e)) for n, e in (("a", first), ("b", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results["a"], results["b"]
