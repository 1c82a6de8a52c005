"""Sleep's rules (ADR 0060): the schedule, the transitions due, the aggregate's phases and deferrals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.being import Being
from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.importance import (
    fact_poignancy,
    node_poignancy,
    poignancy_to_fact_importance,
    poignancy_to_node_importance,
)
from engram.domain.sleep import (
    Depth,
    Mode,
    Phase,
    Sleep,
    SleepSchedule,
    WakeOutcome,
    due_transition,
    is_urgent,
)

T0 = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
NIGHT = SleepSchedule(enabled=True, start_hour=22, duration_hours=6, min_awake_ticks=10, tick_awake_s=5)


def due(**kw: object) -> object:
    args: dict[str, object] = {
        "mode": Mode.AWAKE,
        "since": None,
        "wake_at": None,
        "depth": Depth.LIGHT,
        "cooldown_until": None,
        "schedule": NIGHT,
        "now": T0,
        "urgent_at": None,
    }
    args.update(kw)
    return due_transition(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start_hour", 24),
        ("start_hour", -1),
        ("duration_hours", 0),
        ("duration_hours", 24),
        ("tick_awake_s", 0),
        ("tick_asleep_s", 3601),
        ("cooldown_minutes", -5),
        ("min_awake_ticks", -1),
        ("depth", "coma"),
        ("start_hour", True),
        ("start_hour", 2.5),
    ],
)
def test_a_schedule_out_of_range_is_refused_naming_its_field(field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        SleepSchedule.from_dict({field: value})
    assert caught.value.details["field"] == field


def test_an_unknown_schedule_field_is_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown schedule field 'bedtime'"):
        SleepSchedule.from_dict({"bedtime": 3})


@given(st.integers(0, 23), st.integers(1, 23), st.integers(0, 23))
def test_the_window_wraps_past_midnight(start: int, hours: int, hour: int) -> None:
    s = SleepSchedule(enabled=True, start_hour=start, duration_hours=hours)
    now = T0.replace(hour=hour, minute=30)
    inside = any((start + k) % 24 == hour for k in range(hours))
    assert s.in_window(now) is inside
    begin, end = s.window_around(now)
    assert end - begin == timedelta(hours=hours)
    assert (begin <= now < end) is inside and (inside or now < begin)


def test_a_scheduled_sleep_starts_in_the_window_and_ends_with_it() -> None:
    t = due()  # 01:00 inside 22:00+6h
    assert t is not None and t.to is Mode.ASLEEP and t.reason == "schedule"
    assert t.wake_at == datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
    assert due(now=T0.replace(hour=12)) is None
    assert due(schedule=SleepSchedule(enabled=False, start_hour=22, duration_hours=6)) is None


def test_sleep_waits_for_the_minimum_activity_and_the_cooldown() -> None:
    assert due(since=T0 - timedelta(seconds=49)) is None  # 10 ticks x 5 s = 50 s
    assert due(since=T0 - timedelta(seconds=50)) is not None
    assert due(cooldown_until=T0 + timedelta(minutes=1)) is None
    t = due(cooldown_until=T0 - timedelta(minutes=1))
    assert t is not None and t.reason == "cooldown_over"  # the cooldown ended inside this window
    t = due(cooldown_until=T0 - timedelta(days=1))
    assert t is not None and t.reason == "schedule"


def test_wake_at_the_end_or_for_an_urgent_message_in_light_sleep_only() -> None:
    asleep = {"mode": Mode.ASLEEP, "since": T0 - timedelta(hours=1), "wake_at": T0 + timedelta(hours=1)}
    assert due(**asleep) is None
    t = due(**{**asleep, "now": T0 + timedelta(hours=1)})
    assert t is not None and t.to is Mode.AWAKE and t.reason == "scheduled_end"
    t = due(**asleep, urgent_at=T0)
    assert t is not None and t.reason == "urgent_message"
    assert due(**{**asleep, "depth": Depth.DEEP}, urgent_at=T0) is None
    assert due(**asleep, urgent_at=T0 - timedelta(hours=2)) is None  # came before it fell asleep


@pytest.mark.parametrize(
    ("kw", "urgent"),
    [
        ({"urgent": True}, True),
        ({"priority": 8}, True),
        ({"priority": 7}, False),
        ({"channel": "DM"}, True),
        ({"channel": " direct "}, True),
        ({"channel": "general"}, False),
        ({"role": "assistant", "urgent": True}, False),
    ],
)
def test_urgent_messages(kw: dict[str, object], urgent: bool) -> None:
    args: dict[str, object] = {"role": "user", "channel": None, "urgent": False, "priority": None, **kw}
    assert is_urgent(**args) is urgent  # type: ignore[arg-type]


def test_a_wake_while_compacting_is_deferred_once_and_happens_when_the_phase_completes() -> None:
    s = Sleep.start(uuid4(), T0)
    s.fall_asleep("manual", "light", T0 + timedelta(hours=4), T0)
    assert (s.mode, s.phase) == (Mode.ASLEEP, Phase.COMPACTING)
    assert s.wake("manual", timedelta(minutes=60), T0) is WakeOutcome.DEFERRED
    assert s.wake("urgent_message", timedelta(minutes=60), T0) is WakeOutcome.DEFERRED
    deferred = [e for e in s.collect_events() if isinstance(e, Sleep.WakeDeferred)]
    assert [e.reason for e in deferred] == ["manual"]
    assert s.finish_compacting(timedelta(minutes=60), T0 + timedelta(minutes=5)) is WakeOutcome.WOKE
    woke = [e for e in s.collect_events() if isinstance(e, Sleep.WokeUp)]
    assert woke[0].reason == "manual" and woke[0].was_deferred
    assert s.mode is Mode.AWAKE and s.cooldown_until == T0 + timedelta(minutes=65)


def test_a_dreaming_being_wakes_at_once_and_an_awake_one_cannot_wake() -> None:
    s = Sleep.start(uuid4(), T0)
    with pytest.raises(InvalidTransition, match="awake already"):
        s.wake("manual", timedelta(0), T0)
    s.fall_asleep("schedule", Depth.DEEP, None, T0)
    with pytest.raises(InvalidTransition, match="asleep already"):
        s.fall_asleep("manual", Depth.LIGHT, None, T0)
    assert s.finish_compacting(timedelta(0), T0) is None
    assert s.phase is Phase.DREAMING
    assert s.wake("manual", timedelta(0), T0) is WakeOutcome.WOKE
    assert s.cooldown_until is None  # no cooldown asked for


def test_a_skipped_step_is_recorded_once_per_phase_and_idle_ticks_write_nothing() -> None:
    s = Sleep.start(uuid4(), T0)
    s.fall_asleep("manual", Depth.LIGHT, None, T0)
    s.collect_events()
    assert s.skip_step("importance", "no LLM configured", T0)
    assert not s.skip_step("importance", "no LLM configured", T0)
    s.record_tick({"links": 0}, T0)
    assert len(s.collect_events()) == 1
    s.finish_compacting(timedelta(0), T0)
    assert s.skip_step("importance", "no LLM configured", T0)  # a new phase records it again
    s.record_tick({"links": 3, "profiles": 0}, T0)
    dreamt = [e for e in s.collect_events() if isinstance(e, Sleep.Dreamt)]
    assert dreamt[0].did == {"links": 3} and dreamt[0].tick == 1


@pytest.mark.parametrize("reason", ["", " ", "x" * 201, "a\x00b"])
def test_bad_reasons_are_refused(reason: str) -> None:
    s = Sleep.start(uuid4(), T0)
    with pytest.raises(InvalidInput):
        s.fall_asleep(reason, Depth.LIGHT, None, T0)


def test_an_old_being_snapshot_loads_with_its_window_as_the_schedule() -> None:
    state = {"sleep_window": [22, 6], "name": "x"}
    Being.upcast_v1_v2(state)
    assert state["sleep_schedule"]["enabled"] and state["sleep_schedule"]["start_hour"] == 22
    state = {"sleep_window": None}
    Being.upcast_v1_v2(state)
    assert state["sleep_schedule"]["enabled"] is False


def test_the_importance_scales_map_onto_one_another() -> None:
    assert [node_poignancy(x) for x in (0.0, 0.5, 1.0)] == [1, 6, 10]
    assert [fact_poignancy(i) for i in range(4)] == [1, 4, 7, 10]
    assert [poignancy_to_fact_importance(p) for p in (1, 3, 6, 9, 10)] == [0, 1, 2, 3, 3]
    for p in range(1, 11):
        assert node_poignancy(poignancy_to_node_importance(p)) == p
