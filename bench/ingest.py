"""`engram bench ingest`: notes per second, one note per command and batched, on SQLite or PostgreSQL."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.machine import machine_info
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings


def _scene(i: int) -> NoteInput:
    return NoteInput(
        text=json.dumps(
            {
                "action": f"Reviewed pull request {i} with the platform team and agreed on the rollout",
                "actors": ["me", "Priya"],
                "when": ["2026-11-20"],
                "feeling": "focused",
                "importance": 0.4,
                "themes": ["work"],
            }
        )
    )


@contextmanager
def _schema(database_url: str | None) -> Iterator[str | None]:
    if database_url is None:
        yield None
        return
    from bench.scratch import scratch_schema

    with scratch_schema(database_url) as url:
        yield url


def run(
    database_url: str | None,
    singles: int = 500,
    batched: int = 10_000,
    batch_size: int = 500,
    repeats: int = 3,
) -> dict[str, Any]:
    single_rates, batch_rates = [], []
    for _ in range(repeats):
        # A throwaway schema per run: the log of one run is sealed with the keys of its own data dir
        # (ADR 0073), so a later run must not open it (nor should runs measure each other's tables).
        with tempfile.TemporaryDirectory() as tmp, _schema(database_url) as url:
            settings = Settings(data_dir=Path(tmp), database_url=url, embedder="hashing", llm="none")
            e = bootstrap(settings)
            try:
                name = f"bench-{time.monotonic_ns()}"
                e.beings.register(name)
                notes = [_scene(i) for i in range(singles + batched)]
                t0 = time.perf_counter()
                for note in notes[:singles]:
                    e.notes.take(name, note)
                single_rates.append(singles / (time.perf_counter() - t0))
                t0 = time.perf_counter()
                for i in range(singles, singles + batched, batch_size):
                    e.notes.take_many(name, notes[i : i + batch_size])
                batch_rates.append(batched / (time.perf_counter() - t0))
            finally:
                e.close()
    return {
        "machine": machine_info(),
        "backend": "postgresql" if database_url else "sqlite",
        "config": {"singles": singles, "batched": batched, "batch_size": batch_size, "repeats": repeats},
        "single_notes_per_s": statistics.median(single_rates),
        "batched_notes_per_s": statistics.median(batch_rates),
        "ratio": statistics.median(batch_rates) / statistics.median(single_rates),
    }


def render(result: dict[str, Any]) -> str:
    c = result["config"]
    return "\n".join(
        [
            f"ingest on {result['backend']} — {result['machine']['summary']}",
            f"  one note per command : {result['single_notes_per_s']:>9,.0f} notes/s (median of {c['repeats']}, "
            f"{c['singles']} notes)",
            f"  batches of {c['batch_size']:<10}: {result['batched_notes_per_s']:>9,.0f} notes/s "
            f"({c['batched']} notes) — {result['ratio']:.1f}× faster",
        ]
    )
