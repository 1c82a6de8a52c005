"""The journals' refresh (ADR 0054) for a being with 100k messages, on SQLite or PostgreSQL.

    engram bench journal [--messages 100000] [--increments 100,1000,10000] [--per-day 1000]
                         [--users 5] [--database-url postgresql://…] [--json] [--json-out FILE]

A fresh store gets `--messages` messages of one being (`--users` users, user and assistant turns in
turn, `--per-day` a day, so 100k messages span 100 days), taken 1,000 to a transaction through
`engram.messages.take_many` (nothing is embedded). The conversations view is caught up (timed apart:
it is the worker's cost, not the refresh's). Then, timed:

- a full refresh (`engram journal refresh --full`): every daily file and MEMORY.md;
- a refresh with nothing new;
- for each increment, that many new messages (continuing the timeline), then an incremental refresh:
  the days that got messages and MEMORY.md. A day file is rendered whole from the view, so the cost
  follows the days touched (their size) more than the new messages alone.

Goal (issue #10): an incremental refresh under 1 s, and proportional to the new messages.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from bench.machine import finish, machine_info
from bench.scratch import scratch_schema
from engram.domain.message import Role
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput
from engram.services.config import Settings

BATCH = 1_000
START = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [
    "tomatoes",
    "garden",
    "passport",
    "train",
    "meeting",
    "dinner",
    "budget",
    "boiler",
    "music",
    "weekend",
]


class FixedClock:
    """After every message the bench writes, so that none lies ahead of the intake's clock."""

    def __init__(self, now: datetime) -> None:
        self.value = now

    def now(self) -> datetime:
        return self.value


@contextmanager
def _store(root: Path, database_url: str | None, now: datetime) -> Iterator[Engram]:
    settings: dict[str, Any] = {
        "data_dir": root / "data",
        "journal_dir": root / "journals",
        "embedder": "hashing",
        "llm": "none",
    }
    if database_url:
        with (
            scratch_schema(database_url, "bench_journal_") as url,
            bootstrap(Settings(**settings, database_url=url), clock=FixedClock(now)) as e,
        ):
            yield e
        return
    with bootstrap(Settings(**settings), clock=FixedClock(now)) as e:
        yield e


def message(i: int, per_day: int, users: int) -> MessageInput:
    """The i-th message of the timeline: `per_day` a day, users in turn, every other one an answer."""
    at = START + timedelta(seconds=i * 86_400 / per_day)
    words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3 + i % 9))
    return MessageInput(
        id=f"m{i:07d}",
        user=f"user-{i // 2 % users}",
        role=Role.ASSISTANT if i % 2 else Role.USER,
        text=f"Message {i} about the {words}, said at length enough to be journalled.",
        at=at,
    )


def load(e: Engram, first: int, count: int, per_day: int, users: int) -> float:
    started = time.perf_counter()
    for start in range(first, first + count, BATCH):
        batch = [message(i, per_day, users) for i in range(start, min(start + BATCH, first + count))]
        e.messages.take_many("bench", batch)
    return time.perf_counter() - started


def timed_refresh(e: Engram, *, full: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    done = e.journals.refresh("bench", full=full)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 4), "days": len(done.days), "memory": done.memory}


def catch_up(e: Engram) -> float:
    started = time.perf_counter()
    e.views.ensure(names=["conversations"])
    return time.perf_counter() - started


def run(
    messages: int, increments: list[int], per_day: int, users: int, database_url: str | None, log: Any
) -> dict[str, Any]:
    total = messages + sum(increments)
    now = START + timedelta(seconds=total * 86_400 / per_day) + timedelta(hours=1)
    with (
        tempfile.TemporaryDirectory(prefix="bench-journal-") as tmp,
        _store(Path(tmp), database_url, now) as e,
    ):
        e.beings.register("bench")
        load_s = load(e, 0, messages, per_day, users)
        log(f"took {messages:,} messages in {load_s:.1f} s ({messages / load_s:,.0f}/s)")
        view_s = catch_up(e)
        log(f"conversations view caught up in {view_s:.1f} s")
        full = timed_refresh(e, full=True)
        log(f"full refresh: {full['days']} days and MEMORY.md in {full['seconds']:.3f} s")
        noop = timed_refresh(e)
        log(f"refresh with nothing new: {noop['seconds']:.4f} s")
        steps = []
        written = messages
        for count in increments:
            took = load(e, written, count, per_day, users)
            written += count
            view = catch_up(e)
            step = timed_refresh(e)
            log(f"+{count:,} messages: refresh {step['seconds']:.3f} s ({step['days']} days)")
            steps.append(
                {
                    "new": count,
                    "take_s": round(took, 3),
                    "catch_up_s": round(view, 3),
                    "refresh_s": step["seconds"],
                    "days": step["days"],
                    "ms_per_new_message": round(step["seconds"] * 1000 / count, 4),
                }
            )
        return {
            "messages": messages,
            "days": full["days"],
            "load_s": round(load_s, 2),
            "load_per_s": round(messages / load_s),
            "catch_up_s": round(view_s, 2),
            "full_s": full["seconds"],
            "noop_s": noop["seconds"],
            "increments": steps,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000, help="messages before the increments")
    parser.add_argument("--increments", default="100,1000,10000", help="comma-separated new-message counts")
    parser.add_argument("--per-day", type=int, default=1_000, help="messages a day")
    parser.add_argument("--users", type=int, default=5, help="users the being talks with")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a scratch schema is created)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    increments = [int(s) for s in args.increments.split(",") if s]
    backend = "postgres" if args.database_url else "sqlite"
    figures = run(args.messages, increments, args.per_day, args.users, args.database_url, log)
    result = {
        "benchmark": "journal",
        "meta": {**machine_info(), "backend": backend, "per_day": args.per_day, "users": args.users},
        **figures,
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"# journal refresh — {backend}, {figures['messages']:,} messages over {figures['days']} days")
    print(f"full refresh: {figures['full_s']:.3f} s; nothing new: {figures['noop_s']:.4f} s")
    print("| new messages | days rewritten | refresh (s) | ms per new message |")
    print("|---:|---:|---:|---:|")
    for s in figures["increments"]:
        print(f"| {s['new']:,} | {s['days']} | {s['refresh_s']:.3f} | {s['ms_per_new_message']:.3f} |")


if __name__ == "__main__":
    main()
