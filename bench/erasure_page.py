"""The `engram bench erasure` section of docs/benchmarks.md (issue #13, ADR 0077)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Result = dict[str, Any]
NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
SEALING_GOAL = 0.85
"""Ingest and rebuild with sealing within 15% of without (issue #13)."""


def erasure(
    results: dict[str, Result],
    table: Callable[..., str],
    section: Callable[..., str],
    n: Callable[..., str],
) -> str | None:
    """`table`, `section`, `n`: bench/page.py's helpers (passed in: page.py imports this module)."""
    found = [results[k] for k in ("erasure-sqlite", "erasure-postgresql") if k in results]
    if not found:
        return None
    rows = []
    for r in found:
        for e in r["erasure"]:
            rows.append(
                (
                    NAMES.get(r["backend"], r["backend"]),
                    f"{n(r['nodes'])} + {n(r['other_nodes'])}",
                    e["strategy"],
                    n(e["events"]),
                    f"{e['forget_s']}",
                    f"{e['views_s']}",
                    f"{e['scrub_s']}",
                )
            )
    sealing = [
        (
            NAMES.get(r["backend"], r["backend"]),
            f"{n(r['ingest']['sealed_per_s'])} / {n(r['ingest']['clear_per_s'])}",
            f"{r['ingest']['ratio']}",
            f"{n(r['rebuild']['sealed_events_per_s'])} / {n(r['rebuild']['clear_events_per_s'])}",
            f"{r['rebuild']['ratio']}",
        )
        for r in found
    ]
    reruns = [
        f"{NAMES.get(r['backend'], r['backend'])} {r['ingest_fixed_order']['ratio']}"
        for r in found
        if "ingest_fixed_order" in r
    ]
    rerun_note = (
        [
            "The ingest rounds were run again after the run with the sides alternating which goes first "
            "(the figures above); with the sealed side always first, under a load that fell during the "
            f"run, the ratios were {', '.join(reruns)}."
        ]
        if reruns
        else []
    )
    first = found[0]
    speedups = ", ".join(f"{NAMES.get(r['backend'], r['backend'])} {r['speedup']}×" for r in found)
    return section(
        "Erasure and the cost of sealing",
        "engram bench erasure [--backend postgres]",
        first,
        [
            "`forget being` of a being with the first number of nodes while a being with the second is "
            "present, each strategy in a fresh deployment built the same "
            "way (the beings as `engram bench patrol` builds them): every view rebuilt (ADR 0073) against the "
            f"targeted purge (ADR 0077). Speed-up of the whole `forget`: {speedups}. `views`: the rebuild or "
            "the purge (on PostgreSQL with the `VACUUM FULL` of the purged tables); `scrub`: the VACUUM of "
            "every SQLite view file.",
            table(
                [
                    "backend",
                    "nodes (erased + other)",
                    "strategy",
                    "log events",
                    "forget (s)",
                    "views (s)",
                    "scrub (s)",
                ],
                rows,
            ),
            "Sealing (ADR 0073): `notes.take` per second (one note a command) with events sealed and in "
            f"clear, {first['ingest']['rounds']} interleaved rounds of {first['ingest']['notes_per_round']} "
            "in one deployment, and a rebuild of every view of the same log written sealed and in clear "
            f"({n(first['rebuild']['events'])} events), interleaved rounds; medians. Goal: a ratio of at "
            f"least {SEALING_GOAL} (within 15%). The machine is shared: rounds alternate so that both sides "
            "see the same load, and a ratio above 1 is noise.",
            table(
                [
                    "backend",
                    "notes/s sealed / clear",
                    "ingest ratio",
                    "rebuild events/s sealed / clear",
                    "rebuild ratio",
                ],
                sealing,
            ),
            *rerun_note,
        ],
    )
