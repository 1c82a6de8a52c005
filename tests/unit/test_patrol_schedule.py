from datetime import UTC, datetime, timedelta

from engram.domain.being import in_sleep_window
from engram.services.patrol.schedule import BeingDue, is_due

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
RULES = {"min_notes": 20, "interval": timedelta(minutes=60), "sleep_interval": timedelta(minutes=180)}


def due(pending: int, last_minutes_ago: float | None, window: tuple[int, int] | None = None) -> bool:
    last = NOW - timedelta(minutes=last_minutes_ago) if last_minutes_ago is not None else None
    return is_due(BeingDue("b", pending, last, window), NOW, **RULES)[0]


def test_sleep_window_wraps_past_midnight() -> None:
    assert in_sleep_window(23, 22, 6) and in_sleep_window(3, 22, 6)
    assert not in_sleep_window(4, 22, 6) and not in_sleep_window(21, 22, 6)
    assert in_sleep_window(2, 2, 4) and not in_sleep_window(6, 2, 4)


def test_awake_schedule() -> None:
    assert not due(0, None)
    assert due(20, 1)  # enough new notes
    assert not due(5, 10)  # few notes, recent patrol
    assert due(5, 61)  # few notes, interval elapsed
    assert due(1, None)  # never patrolled


def test_sleep_schedule_is_slower() -> None:
    window = (2, 4)  # 02:00-06:00, NOW is 03:00
    assert not due(50, 60, window)  # many notes, but asleep and patrolled an hour ago
    assert due(1, 181, window)
    assert not due(0, 500, window)
