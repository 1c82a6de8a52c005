"""`engram bench erasure --items`: forgetting one note and one subject in a being of N nodes beside
another being (ADR 0089), with every view rebuilt (ADR 0076's first way) and with the targeted purge
of the erased aggregates' rows, in one deployment built as `engram bench erasure` builds it.

The big being also gets, per strategy, a note, and a user with `MESSAGES` messages and a fact about
them; each strategy forgets its own note and its own user. Timed: the whole `forget` (key
destruction, views, journals, receipt, file scrub), and apart its views part, the count of the
events sealed under the destroyed keys (a scan of the log's headers) and the scrub of the files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.audit_log_bench import SCENE
from bench.erasure_bench import DYING_PER_CYCLE, _rows_of, _timed
from bench.messages_bench import _engram as fresh_engram
from bench.patrol_bench import build
from engram.services.bootstrap import Engram
from engram.services.commands import FactInput, MessageInput, NoteInput
from engram.services.erasure import Forgotten

MESSAGES = 20
STRATEGIES = ("full rebuild", "targeted purge")


def _plant(e: Engram, being: str) -> dict[str, tuple[str, str]]:
    """Per strategy: the note to forget and the user to forget."""
    planted: dict[str, tuple[str, str]] = {}
    for k, strategy in enumerate(STRATEGIES):
        note = e.notes.take(being, NoteInput(text=json.dumps({**SCENE, "action": f"walked, {strategy}"})))
        user = f"user{k}"
        e.messages.take_many(
            being,
            [MessageInput(id=f"{user}-{i}", user=user, text=f"{user} says {i}") for i in range(MESSAGES)],
        )
        e.facts.state(being, FactInput(subject=user, text=f"{user} likes tea"))
        planted[strategy] = (note.note_id, user)
    return planted


def _forget(e: Engram, being: str, note_id: str, user: str, targeted: bool) -> dict[str, Any]:
    forgetting, views = e.forgetting, e.views
    purge = forgetting.purge
    timers: dict[str, float] = {}
    if targeted:
        assert purge is not None
        purge.purge_items = _timed(timers, "views", purge.purge_items)  # type: ignore[method-assign]
    else:
        forgetting.purge = None
        views.rebuild_all = _timed(timers, "views", views.rebuild_all)  # type: ignore[method-assign]
    storage = forgetting.storage
    # What grows with the deployment besides the views: the count of sealed events, the file scrub.
    storage.sealed_under = _timed(timers, "count", storage.sealed_under)  # type: ignore[method-assign]
    storage.scrub = _timed(timers, "scrub", storage.scrub)  # type: ignore[method-assign]
    out: dict[str, Any] = {"strategy": STRATEGIES[targeted], "events": e.store.log.head()}
    try:
        calls: list[tuple[str, Callable[[], Forgotten]]] = [
            ("note", lambda: e.item_forgetting.forget_item("note", note_id, by="bench")),
            ("subject", lambda: e.item_forgetting.forget_subject(being, user, by="bench")),
        ]
        for what, call in calls:
            timers.clear()
            t0 = time.perf_counter()
            done = call()
            out[f"{what}_s"] = round(time.perf_counter() - t0, 2)
            for part in ("views", "count", "scrub"):
                out[f"{what}_{part}_s"] = round(timers.get(part, 0.0), 2)
            out[f"{what}_counts"] = done.counts
    finally:
        forgetting.purge = purge
        vars(views).pop("rebuild_all", None)
        vars(storage).pop("sealed_under", None)
        vars(storage).pop("scrub", None)
        if purge is not None:
            vars(purge).pop("purge_items", None)
    return out


def erase_items(root: Path, url: str | None, nodes: int, other: int) -> dict[str, Any]:
    with fresh_engram(root, url) as e:
        started = time.perf_counter()
        other_id, _, _ = build(e, other, DYING_PER_CYCLE, seed=2)
        build(e, nodes, DYING_PER_CYCLE, seed=1)
        being = f"Bench{nodes}"
        planted = _plant(e, being)
        e.views.ensure()
        built_s = round(time.perf_counter() - started, 1)
        other_rows = _rows_of(e, other_id)
        runs = []
        for targeted, strategy in enumerate(STRATEGIES):
            note_id, user = planted[strategy]
            runs.append({**_forget(e, being, note_id, user, bool(targeted)), "build_s": built_s})
            e.views.ensure()
            if _rows_of(e, other_id) != other_rows:
                raise SystemExit(f"forgetting an item of {being} changed the other being's rows")
    return {"items": runs, "items_speedup": _speedup(runs)}


def _speedup(runs: list[dict[str, Any]]) -> dict[str, float]:
    full, targeted = runs
    return {w: round(full[f"{w}_s"] / max(targeted[f"{w}_s"], 0.01), 1) for w in ("note", "subject")}


def _parts(e: dict[str, Any], what: str) -> str:
    return ", ".join(
        f"{p} {e[f'{what}_{p}_s']} s" for p in ("views", "count", "scrub") if f"{what}_{p}_s" in e
    )


def print_items(r: dict[str, Any]) -> None:
    print(f"item erasure, {r['backend']}: a being of {r['nodes']:,} nodes beside one of {r['other_nodes']:,}")
    for e in r["items"]:
        print(
            f"  {e['strategy']:>15}: forget note {e['note_s']} s ({_parts(e, 'note')}), "
            f"forget subject {e['subject_s']} s ({_parts(e, 'subject')}), log of {e['events']:,} events"
        )
    s = r["items_speedup"]
    print(f"  speed-up: note {s['note']}x, subject {s['subject']}x")
