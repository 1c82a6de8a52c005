"""When the worker patrols a being by itself (ADR 0007).

Awake: as soon as it has `patrol_min_notes` new scene notes, or when `patrol_interval_minutes` have
passed since its last patrol and at least one note is new. Inside its sleep window (spec 003): on the
slower sleep schedule, one patrol per `sleep_patrol_interval_minutes` if any note is new — batching
the night's notes instead of reacting to each burst.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engram.domain.being import in_sleep_window


@dataclass(frozen=True)
class BeingDue:
    being_id: str
    pending_notes: int
    last_patrol_at: datetime | None
    sleep_window: tuple[int, int] | None


def is_due(
    b: BeingDue,
    now: datetime,
    *,
    min_notes: int,
    interval: timedelta,
    sleep_interval: timedelta,
) -> tuple[bool, str]:
    if b.pending_notes == 0:
        return False, "no new notes"
    asleep = b.sleep_window is not None and in_sleep_window(now.hour, *b.sleep_window)
    since = now - b.last_patrol_at if b.last_patrol_at else None
    if asleep:
        if since is None or since >= sleep_interval:
            return True, "sleep schedule"
        return False, "asleep; next patrol on the sleep schedule"
    if b.pending_notes >= min_notes:
        return True, f"{b.pending_notes} new notes"
    if since is None or since >= interval:
        return True, "interval elapsed with new notes"
    return False, "waiting for more notes or the interval"
