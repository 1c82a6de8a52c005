"""Message intake throughput: a history of chat messages imported in batches, and where the time goes.

    engram bench messages [--messages 100000] [--users 100] [--batch-size 1000]
                          [--database-url postgresql://…] [--json] [--json-out FILE]

`--messages` lines of JSON (`{id, user, channel, role, text, at}`, as `engram messages import`
reads them) for `--users` users, each user's messages a minute apart with a two-hour pause every 40
(so sessions open and close), go through `services/message_import.py` exactly as the CLI runs it:
parsed and validated, sorted by time, taken `--batch-size` to a transaction with
`take_many(skip_refused=True)`; no embedding (messages are not embedded). Then the two views that
follow messages catch up (`conversations`, `message_search`), each timed on its own.

Where the time goes: the intake is timed in parts by wrapping the functions that do each part —
parsing and validating the lines (`parse_line`), loading aggregates (`AggregateStore.find_many`:
the messages, to find duplicates, and the users' conversations), encoding events
(`mapper.to_stored_event`), and saving (`AggregateStore.save`, which includes the encoding; the rest
of it is the insert and the commit). What is left is the domain's own work (placing each message
in its session, building the events) and the batching.

The goal (issue #10): at least 2,000 messages/s through the intake, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from bench.machine import finish, machine_info
from bench.scratch import scratch_schema
from engram.services import message_import
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.note_import import Line

GOAL_PER_S = 2_000
START = datetime(2025, 1, 1, 8, 0, tzinfo=UTC)
SESSION_EVERY = 40  # messages of a user between two pauses long enough to close a session
WORDS = [
    "garden",
    "tomatoes",
    "saturday",
    "market",
    "coffee",
    "project",
    "deadline",
    "review",
    "travel",
    "train",
    "ticket",
    "dinner",
    "birthday",
    "present",
    "doctor",
    "appointment",
    "weather",
    "rain",
    "sunny",
    "weekend",
    "plans",
    "movie",
    "book",
    "chapter",
    "music",
    "concert",
    "friend",
    "family",
    "call",
    "later",
    "tomorrow",
    "morning",
    "evening",
    "kitchen",
    "recipe",
    "bread",
    "soup",
    "walk",
    "dog",
]


def history(messages: int, users: int) -> list[str]:
    """The JSON lines of the import, in the users' turn (a file lists conversations interleaved)."""
    lines = []
    for i in range(messages):
        user, turn = i % users, i // users
        at = START + timedelta(minutes=turn + (turn // SESSION_EVERY) * 120)
        words = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(8 + i % 9))
        lines.append(
            json.dumps(
                {
                    "id": f"msg-{i}",
                    "user": f"user-{user:03d}",
                    "channel": "telegram" if user % 3 else "mail",
                    "role": "assistant" if turn % 2 else "user",
                    "text": f"Message {i}: {words}.",
                    "at": at.isoformat(),
                }
            )
        )
    return lines


@contextmanager
def _engram(root: Path, database_url: str | None) -> Iterator[Engram]:
    if database_url:
        with scratch_schema(database_url, "bench_messages_") as url:
            e = bootstrap(Settings(data_dir=root, database_url=url, embedder="hashing", llm="none"))
            try:
                yield e
            finally:
                e.close()
        return
    e = bootstrap(Settings(data_dir=root, embedder="hashing", llm="none"))
    try:
        yield e
    finally:
        e.close()


class Timers:
    """Seconds spent in the wrapped functions, by part."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - started

        return timed


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


SEARCHES: tuple[tuple[str, dict[str, str]], ...] = (
    ("4711", {}),  # a word one message holds
    ("garden tomatoes", {}),  # two common words: about a third of the messages hold each
    ("saturday market", {"channel": "mail"}),
    ("message 4711", {"user": "user-011"}),  # a word every message holds, and a rare one
)
SEARCH_RUNS = 5


def analyze(e: Engram) -> None:
    """PostgreSQL: the planner statistics autovacuum gathers soon after a bulk load, gathered now, so
    that searches run with the plan a running deployment gets (as `notes_sweep` does)."""
    if e.views.dbs["message_search"].dialect != "postgres":
        return
    with e.views.read.reading("message_search") as (conn, tables):
        for table in tables.values():
            conn.execute(f"ANALYZE {table}")


def search_latency(e: Engram) -> list[dict[str, Any]]:
    """`engram messages search`'s service on the caught-up views: the median of 5 runs per query."""
    rows = []
    for query, filters in SEARCHES:
        times, hits = [], 0
        for _ in range(SEARCH_RUNS):
            seconds, found = _timed(lambda q=query, f=filters: e.message_search.search("Aria", q, **f))  # type: ignore[misc]
            times.append(seconds)
            hits = len(found.hits)
        rows.append(
            {
                "query": query,
                "filters": filters,
                "median_ms": round(sorted(times)[SEARCH_RUNS // 2] * 1000, 1),
                "hits": hits,
            }
        )
    return rows


def run(
    messages: int, users: int, batch_size: int, database_url: str | None, log: Callable[[str], None]
) -> dict[str, Any]:
    lines = [Line(n, text) for n, text in enumerate(history(messages, users), 1)]
    with tempfile.TemporaryDirectory(prefix="bench-messages-") as tmp, _engram(Path(tmp), database_url) as e:
        e.beings.register("Aria")
        timers = Timers()
        store = e.store
        store.find_many = timers.wrap("aggregate loads", store.find_many)  # type: ignore[method-assign]
        store.save = timers.wrap("save (encode + insert + commit)", store.save)  # type: ignore[method-assign]
        mapper = store.app.mapper
        mapper.to_stored_event = timers.wrap("event encoding", mapper.to_stored_event)  # type: ignore[method-assign]
        parse = message_import.parse_line
        message_import.parse_line = timers.wrap("parse + validate lines", parse)
        done = {"batches": 0}

        def progress(p: message_import.MessageImportProgress) -> None:
            done["batches"] += 1
            if done["batches"] % 20 == 0 or p.read >= p.total:
                log(f"  {p.read:,}/{p.total:,} messages, {p.taken:,} taken")

        try:
            intake_s, report = _timed(
                lambda: message_import.import_messages(
                    e.messages, "Aria", lines, progress=progress, batch_size=batch_size
                )
            )
        finally:
            message_import.parse_line = parse
        counts = report.progress
        if counts.taken != messages or counts.refused:
            raise RuntimeError(f"the intake did not take every message: {report.as_dict()}")
        log(f"  intake: {messages / intake_s:,.0f} messages/s ({intake_s:.1f} s)")
        views: dict[str, float] = {}
        for view in ("conversations", "message_search"):
            views[view], _ = _timed(lambda view=view: e.views.ensure(names=[view]))  # type: ignore[misc]
            log(f"  {view} view caught up in {views[view]:.1f} s")
        analyze(e)
        search = search_latency(e)
        for row in search:
            log(f"  search {row['query']!r} {row['filters']}: {row['median_ms']} ms, {row['hits']} hits")
        seconds = dict(timers.seconds)
        save_s = seconds.pop("save (encode + insert + commit)", 0.0)
        encode_s = seconds.get("event encoding", 0.0)
        parts = {
            "parse + validate lines": seconds.get("parse + validate lines", 0.0),
            "aggregate loads": seconds.get("aggregate loads", 0.0),
            "event encoding": encode_s,
            "insert + commit": save_s - encode_s,
        }
        parts["domain + batching (the rest)"] = intake_s - sum(parts.values())
        events = e.store.head()
        return {
            "messages": messages,
            "users": users,
            "batch_size": batch_size,
            "sessions": len(report.sessions),
            "events": events,
            "intake_s": round(intake_s, 2),
            "intake_per_s": round(messages / intake_s),
            "parts_s": {k: round(v, 2) for k, v in parts.items()},
            "views_s": {k: round(v, 2) for k, v in views.items()},
            "with_views_per_s": round(messages / (intake_s + sum(views.values()))),
            "search": search,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000, help="messages in the history")
    parser.add_argument("--users", type=int, default=100, help="users the messages are spread over")
    parser.add_argument("--batch-size", type=int, default=1000, help="messages per transaction (≤ 1000)")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a scratch schema is created)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    backend = "postgres" if args.database_url else "sqlite"
    log(f"messages: {args.messages:,} over {args.users} users on {backend}")
    measured = run(args.messages, args.users, args.batch_size, args.database_url, log)
    result = {
        "benchmark": "messages",
        "meta": {**machine_info(), "backend": backend, "goal_per_s": GOAL_PER_S},
        **measured,
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(render(result))


def render(result: dict[str, Any]) -> str:
    r = result
    lines = [
        f"# message intake — {r['meta']['backend']}, {r['messages']:,} messages, {r['users']} users, "
        f"batches of {r['batch_size']}",
        f"intake: {r['intake_per_s']:,} messages/s ({r['intake_s']} s; goal ≥ {GOAL_PER_S:,}), "
        f"{r['events']:,} events, {r['sessions']:,} sessions",
        "where the intake's time goes:",
        *(f"  {part:<32} {s:>8.2f} s  {s / r['intake_s']:>5.0%}" for part, s in r["parts_s"].items()),
        "views catching up afterwards:",
        *(f"  {view:<32} {s:>8.2f} s" for view, s in r["views_s"].items()),
        f"intake and views together: {r['with_views_per_s']:,} messages/s",
        "search (median of 5):",
        *(
            f"  {x['query']!r} {x['filters'] or ''}: {x['median_ms']} ms, {x['hits']} hits"
            for x in r["search"]
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
