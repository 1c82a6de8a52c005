"""The `engram bench erasure --items` section of docs/benchmarks.md (issue #13, ADR 0089)."""

from __future__ import annotations

from collections.abc import Callable

from bench.erasure_page import NAMES, Result


def _cell(e: Result, what: str) -> str:
    """Total (views / count / scrub), the parts a run timed."""
    parts = [str(e[f"{what}_{p}_s"]) for p in ("views", "count", "scrub") if f"{what}_{p}_s" in e]
    return f"{e[f'{what}_s']} ({' / '.join(parts)})"


def erasure_items(
    results: dict[str, Result],
    table: Callable[..., str],
    section: Callable[..., str],
    n: Callable[..., str],
) -> str | None:
    """`table`, `section`, `n`: bench/page.py's helpers (passed in: page.py imports this module)."""
    found = [results[k] for k in ("erasure-items-sqlite", "erasure-items-postgresql") if k in results]
    if not found:
        return None
    rows = [
        (
            NAMES.get(r["backend"], r["backend"]),
            f"{n(r['nodes'])} + {n(r['other_nodes'])}",
            e["strategy"],
            n(e["events"]),
            _cell(e, "note"),
            _cell(e, "subject"),
        )
        for r in found
        for e in r["items"]
    ]
    speedups = ", ".join(
        f"{NAMES.get(r['backend'], r['backend'])} note {r['items_speedup']['note']}×, "
        f"subject {r['items_speedup']['subject']}×"
        for r in found
    )
    return section(
        "Forgetting one item or one user",
        "engram bench erasure --items [--backend postgres]",
        found[0],
        [
            "`forget note` of one note and `forget subject` of one user (20 messages and a fact) in a being "
            "with the first number of nodes while a being with the second is present, in one deployment: "
            "every view rebuilt (ADR 0076's first way) against the rows of the erased aggregates purged in "
            f"place, their counters taken out (ADR 0089). Speed-up of the whole `forget`: {speedups}. In "
            "brackets: the views' part (the rebuild, or the purge), then, where the run timed them, the count "
            "of the events sealed under the destroyed keys (a scan of the log's headers) and the scrub of the "
            "files (SQLite's VACUUM of every view file); the rest is the key destruction, the journals and "
            "the receipt.",
            table(
                ["backend", "nodes (big + other)", "strategy", "log events", "note (s)", "subject (s)"],
                rows,
            ),
        ],
    )
