"""Session close and extractive summary cost per session, for sessions of 10 and 100 messages (issue
#10, ADR 0053).

    engram bench sessions [--sizes 10 100] [--sessions 40] [--json] [--json-out FILE]

On a fresh SQLite deployment (no LLM: the extractive method), one being; each session is a
conversation with a user of its own, its messages taken in one batch (a minute apart) and projected,
untimed. Then, per session, timed:

- `close`: the worker's idle close of that session (`ConversationSummaries.close_idle`, the clock
  reading recorded), with the conversations view caught up to it;
- `summarize`: `run_due` for the being — the session summary, and the spine when 20 messages or more
  were said (each session of 100 messages brings one) — with the view caught up to what it wrote;
- `extract`: the extractive session summary alone, on the session's messages (no store, no view).

Figures are printed (`--json`: the JSON result alone on stdout, as `engram bench all` keeps it;
`--json-out FILE`: also saved); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.machine import finish, machine_info
from bench.metrics import percentile
from engram.adapters.logging import configure_logging
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput
from engram.services.config import Settings
from engram.services.summary_extractive import session_summary

LINES = [
    ("user", "I started training for the spring half marathon with my sister Ana."),
    ("assistant", "That sounds great. How many runs a week are you planning?"),
    ("user", "Three runs a week, and I need to buy new running shoes before Saturday."),
    ("assistant", "I'll remind you about the shoes on Friday."),
    ("user", "Thanks! Work is busy too, the budget report is due next Tuesday."),
    ("assistant", "Should we plan the report in small steps this week?"),
    ("user", "Yes please. Ana says the marathon training plan is too hard for me."),
    ("assistant", "Ana may be right; a gentler training plan could help you finish the race."),
    ("user", "Can you find a beginner plan for the half marathon?"),
    ("assistant", "Let me look for a beginner half marathon plan for you."),
]


def _ms(times: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(percentile(times, 50), 3),
        "p95_ms": round(percentile(times, 95), 3),
        "sessions": len(times),
    }


def measure(settings: Settings, size: int, sessions: int) -> dict[str, Any]:
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    e: Engram = bootstrap(settings)
    try:
        e.beings.register("Aria")
        close, summarize, extract = [], [], []
        spines = 0
        for k in range(sessions):
            user = f"user-{k}"
            batch = [
                MessageInput(
                    id=f"{user}-{i}",
                    user=user,
                    role=LINES[i % len(LINES)][0],
                    text=f"{LINES[i % len(LINES)][1]} (turn {i})",
                    at=start + timedelta(minutes=i),
                )
                for i in range(size)
            ]
            e.messages.take_many("Aria", batch)
            e.views.ensure()
            later = e.clock.now() + timedelta(hours=1)  # no message arrived for an hour: idle
            t = time.perf_counter()
            closed = e.summaries.close_idle(later)
            e.views.ensure()
            close.append((time.perf_counter() - t) * 1000)
            assert closed == 1, closed
            t = time.perf_counter()
            report = e.summaries.run_due("Aria")
            e.views.ensure()
            summarize.append((time.perf_counter() - t) * 1000)
            assert report.sessions == 1, report
            spines += report.spines
            being_id, session_id = _latest(e, user)
            rows = e.views.conversations.session_messages(being_id, session_id)
            t = time.perf_counter()
            session_summary(rows, "Aria")
            extract.append((time.perf_counter() - t) * 1000)
        return {
            "messages_per_session": size,
            "close": _ms(close),
            "summarize": _ms(summarize),
            "close_and_summarize": _ms([a + b for a, b in zip(close, summarize, strict=True)]),
            "extract": _ms(extract),
            "spines": spines,
        }
    finally:
        e.close()


def _latest(e: Engram, user: str) -> tuple[Any, str]:
    """The being's id and its latest session with `user`."""
    being = e.views.read.being_by_name("Aria")
    assert being is not None
    [session] = e.views.conversations.sessions(being["id"], user=user, limit=1)
    return being["id"], str(session["id"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="engram bench sessions", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the JSON result alone on stdout")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    result: dict[str, Any] = {
        "benchmark": "sessions",
        "backend": "sqlite",
        "machine": machine_info(),
        "runs": [],
    }
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="engram-sessions-bench-") as tmp:
            run = measure(Settings(data_dir=Path(tmp), embedder="hashing", llm="none"), size, args.sessions)
        result["runs"].append(run)
        print(
            f"{size:>4} messages a session ({run['close']['sessions']} sessions): "
            f"close median {run['close']['median_ms']:.2f} ms p95 {run['close']['p95_ms']:.2f} ms; "
            f"summarize median {run['summarize']['median_ms']:.2f} ms p95 {run['summarize']['p95_ms']:.2f} ms; "
            f"both median {run['close_and_summarize']['median_ms']:.2f} ms "
            f"p95 {run['close_and_summarize']['p95_ms']:.2f} ms; "
            f"extractive summary alone median {run['extract']['median_ms']:.2f} ms "
            f"p95 {run['extract']['p95_ms']:.2f} ms; spines written {run['spines']}",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
