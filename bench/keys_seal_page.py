"""The `engram bench keys-seal` section of docs/benchmarks.md (issue #13, ADR 0095)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Result = dict[str, Any]
NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
FORMS = {"clear": "in clear (before ADR 0073)", "being-key": "under the being's key (before ADR 0075)"}


def keys_seal(
    results: dict[str, Result],
    table: Callable[..., str],
    section: Callable[..., str],
    n: Callable[..., str],
) -> str | None:
    """`table`, `section`, `n`: bench/page.py's helpers (passed in: page.py imports this module)."""
    found = [results[k] for k in ("keys-seal-sqlite", "keys-seal-postgresql") if k in results]
    if not found:
        return None
    rows = [
        (
            NAMES.get(r["backend"], r["backend"]),
            FORMS.get(x["form"], x["form"]),
            f"{n(x['sealed'])} of {n(x['log_events'])}",
            n(x["events_per_s"]),
            f"{x['seal_s']} ({x['rewrite_s']} / {x['rechain_s']} / {x['scrub_s']})",
            str(x["dry_run_s"]),
            str(x["verify_after_s"]),
        )
        for r in found
        for x in r["runs"]
    ]
    return section(
        "Sealing an old log (`keys seal`)",
        "engram bench keys-seal [--backend postgres]",
        found[0],
        [
            "A log of one being's notes written as an older version wrote them (every event in clear, or "
            "under the being's key), rewritten by `engram keys seal` into today's form: an item key per "
            "note from the owned-key pool, the events sealed and updated in place in batches of "
            f"{found[0]['runs'][0]['batch']:,}, the hash chain computed again from each batch's first "
            "position to the head, a receipt, then the files scrubbed. Events per second over the whole "
            "command; in brackets the rewrite (of which re-hashing the chain) and the scrub (SQLite VACUUM "
            "of the log file, PostgreSQL VACUUM FULL of the events table). The dry run decrypts and decides "
            "without writing. Shared machine (two cores, other helpers' work running).",
            table(
                [
                    "backend",
                    "old form",
                    "events sealed",
                    "events/s",
                    "seal s (rewrite / re-hash / scrub)",
                    "dry run s",
                    "verify after s",
                ],
                rows,
            ),
        ],
    )
