"""Sleep as a process manager on every backend (issue #12, ADR 0060): the schedule, transitions with
their reasons, deferred wakes, urgent messages, naps, skipped steps and the worker's round."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.sleep import Sleep, sleep_id_for
from engram.services.bootstrap import Engram
from engram.services.commands import MessageInput
from engram.services.sleep import StepContext, StepResult
from tests.support import SteppingClock

NIGHT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


class CountingStep:
    """A step with `items` to handle, `per_tick` each tick; records what it was told."""

    def __init__(self, name: str, phase: str, items: int, per_tick: int = 1, needs_llm: bool = False) -> None:
        self.name, self.phase, self.left, self.per_tick, self.needs_llm = (
            name,
            phase,
            items,
            per_tick,
            needs_llm,
        )
        self.seen: list[StepContext] = []

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        self.seen.append(ctx)
        if self.needs_llm and not ctx.llm_available:
            return StepResult(skipped="no LLM configured")
        n = min(self.per_tick, self.left)
        self.left -= n
        return StepResult(done=n, remaining=self.left > 0)

    def pending(self, being_id: UUID) -> int | None:
        return self.left


def _steps(engram: Engram, *steps: Any) -> None:
    engram.__dict__["dream_steps"] = list(steps)


def _events(engram: Engram, being_id: UUID) -> list[Any]:
    return list(engram.store.log.app.repository.event_store.get(sleep_id_for(being_id)))


@pytest.fixture
def being(engram: Engram) -> UUID:
    return UUID(engram.beings.register("Ada").being_id)


def test_the_schedule_puts_a_being_to_sleep_compacting_then_dreaming_and_wakes_it_at_the_end(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    compact = CountingStep("consolidation", "compacting", 2)
    dream = CountingStep("links", "dreaming", 3, per_tick=2)
    _steps(engram, compact, dream)
    engram.beings.set_sleep_schedule("Ada", start_hour=22, duration_hours=6, min_awake_ticks=0)
    clock.current = NIGHT.replace(hour=12)
    assert engram.sleep.tick("Ada").transitions == []  # outside the window: stays awake
    clock.current = NIGHT
    first = engram.sleep.tick("Ada")
    assert first.transitions == ["fell asleep (schedule)"] and first.did == {"consolidation": 1}
    assert (first.mode, first.phase) == ("asleep", "compacting")
    second = engram.sleep.tick("Ada")
    assert second.transitions == ["compacting done; dreaming"]
    assert engram.sleep.tick("Ada").did == {"links": 2}
    assert engram.sleep.tick("Ada").did == {"links": 1}
    mode = engram.sleep.mode("Ada")
    assert mode.mode == "asleep" and mode.phase == "dreaming"
    assert mode.wake_at is not None
    assert datetime.fromisoformat(mode.wake_at) == datetime(2026, 11, 28, 4, 0, tzinfo=UTC)
    assert mode.next_transition == f"wakes at {mode.wake_at}"
    clock.current = datetime(2026, 11, 28, 4, 0, tzinfo=UTC)
    end = engram.sleep.tick("Ada")
    assert end.transitions == ["woke up (scheduled_end)"] and end.mode == "awake"
    after = engram.sleep.mode("Ada")
    assert after.cooldown_until is not None and after.next_transition is not None
    assert [t.event for t in reversed(after.recent)] == [
        "fell_asleep",
        "dreamt",
        "dreamt",
        "phase_changed",
        "dreamt",
        "dreamt",
        "woke_up",
    ]
    assert [t.reason for t in after.recent if t.event != "dreamt"] == [
        "scheduled_end",
        "consolidation_done",
        "schedule",
    ]


def test_a_wake_while_compacting_waits_for_the_phase_and_is_recorded(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    compact = CountingStep("consolidation", "compacting", 3)
    _steps(engram, compact)
    engram.sleep.sleep("Ada", hours=2)
    done = engram.sleep.wake("Ada", reason="operator")
    assert done.details["outcome"] == "deferred"
    assert engram.sleep.mode("Ada").next_transition == "wakes when compacting completes"
    assert engram.sleep.wake("Ada").details["outcome"] == "deferred"  # asked again: recorded once
    reports = [engram.sleep.tick("Ada") for _ in range(3)]
    assert reports[-1].transitions == ["compacting done; dreaming", "woke up (deferred wake)"]
    assert reports[-1].mode == "awake"
    events = _events(engram, being)
    assert [type(e).__name__ for e in events].count("WakeDeferred") == 1
    woke = next(e for e in events if isinstance(e, Sleep.WokeUp))
    assert woke.reason == "operator" and woke.was_deferred


def test_an_urgent_message_wakes_a_light_sleeper_but_not_a_deep_one(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    _steps(engram)
    engram.sleep.sleep("Ada", hours=4)
    engram.sleep.tick("Ada")  # nothing to compact: on to dreaming
    engram.messages.take("Ada", MessageInput(id="m1", user="bob", text="fyi, lunch is at noon"))
    assert engram.sleep.tick("Ada").transitions == []
    engram.messages.take("Ada", MessageInput(id="m2", user="bob", text="the server is down", priority=9))
    woke = engram.sleep.tick("Ada")
    assert woke.transitions == ["woke up (urgent_message)"]
    engram.sleep.sleep("Ada", hours=4, depth="deep")
    engram.sleep.tick("Ada")
    engram.messages.take("Ada", MessageInput(id="m3", user="bob", text="call me", urgent=True))
    assert engram.sleep.tick("Ada").transitions == []
    assert engram.sleep.mode("Ada").mode == "asleep"


def test_dream_naps_an_awake_being_until_nothing_is_left_and_skips_llm_steps_once(
    engram: Engram, being: UUID
) -> None:
    reflect = CountingStep("reflection", "dreaming", 5, needs_llm=True)
    links = CountingStep("links", "dreaming", 4, per_tick=3)
    _steps(engram, CountingStep("consolidation", "compacting", 1), links, reflect)
    report = engram.sleep.dream("Ada")
    assert report.napped and report.mode == "awake"
    assert report.did == {"consolidation": 1, "links": 4}
    assert report.skipped == {"reflection": "no LLM configured"}
    events = _events(engram, being)
    skipped = [e for e in events if isinstance(e, Sleep.StepSkipped)]
    assert [(e.phase, e.step) for e in skipped] == [("dreaming", "reflection")]
    woke = [e for e in events if isinstance(e, Sleep.WokeUp)]
    assert woke[-1].reason == "nap_over" and woke[-1].cooldown_until is None
    assert engram.sleep.dream("Ada", ticks=2).ticks == 2


def test_a_failing_step_does_not_stop_the_others_and_the_phase_waits(engram: Engram, being: UUID) -> None:
    class Broken(CountingStep):
        def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
            raise RuntimeError("disk on fire")

    _steps(engram, Broken("scoring", "compacting", 1), CountingStep("consolidation", "compacting", 1))
    engram.sleep.sleep("Ada")
    r = engram.sleep.tick("Ada")
    assert r.errors == {"scoring": "RuntimeError: disk on fire"} and r.did == {"consolidation": 1}
    assert engram.sleep.tick("Ada").phase == "compacting"  # a failed step holds the phase


def test_bad_commands_are_refused_with_their_reason(engram: Engram, being: UUID) -> None:
    with pytest.raises(InvalidTransition, match="awake already"):
        engram.sleep.wake("Ada")
    with pytest.raises(InvalidInput):
        engram.sleep.sleep("Ada", hours=0)
    with pytest.raises(InvalidInput):
        engram.beings.set_sleep_schedule("Ada", start_hour=24)
    with pytest.raises(InvalidInput):
        engram.beings.set_sleep_schedule("Ada", duration_hours=0)
    with pytest.raises(InvalidInput):
        engram.sleep.dream("Ada", ticks=0)
    engram.sleep.sleep("Ada")
    with pytest.raises(InvalidTransition, match="asleep already"):
        engram.sleep.sleep("Ada")
    with pytest.raises(InvalidInput):
        engram.messages.take("Ada", MessageInput(id="p", user="bob", text="hi", priority=11))


def test_the_worker_round_ticks_beings_at_their_rates(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    steps = CountingStep("links", "dreaming", 100)
    _steps(engram, steps)
    engram.beings.register("Bo")
    engram.beings.set_sleep_schedule(
        "Ada", start_hour=22, duration_hours=6, min_awake_ticks=0, tick_asleep_s=3600
    )
    clock.current = NIGHT
    assert engram.sleep.worker_round() == 1  # Ada falls asleep; Bo has no schedule
    assert engram.sleep.worker_round() == 0  # her next tick is an hour away
    engram.messages.take("Ada", MessageInput(id="u", user="bob", text="wake up", channel="dm"))
    assert engram.sleep.worker_round() == 1  # an urgent message does not wait for the tick
    assert engram.sleep.mode("Ada").recent[0].reason in {"urgent_message", "consolidation_done"}


def test_the_schedule_survives_a_rebuild_and_old_window_commands_still_work(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    engram.beings.set_sleep_window("Ada", 21, 3)
    assert engram.sleep.mode("Ada").schedule["start_hour"] == 21
    engram.beings.set_sleep_schedule("Ada", cooldown_minutes=5, depth="deep")
    engram.sleep.sleep("Ada")
    before = engram.sleep.mode("Ada").model_dump()
    engram.views.rebuild("sleep")
    after = engram.sleep.mode("Ada").model_dump()
    assert before == after and after["schedule"]["cooldown_minutes"] == 5 and after["depth"] == "deep"
    engram.beings.clear_sleep_window("Ada")
    assert engram.sleep.mode("Ada").schedule["enabled"] is False
    assert engram.views.read.being(being)["sleep_start_hour"] is None


def test_the_importance_ledger_puts_every_memory_on_one_scale(engram: Engram, being: UUID) -> None:
    from engram.services.commands import FactInput

    engram.messages.take("Ada", MessageInput(id="a", user="bob", text="hello there"))
    engram.messages.take("Ada", MessageInput(id="b", user="bob", text="my mother died today", priority=9))
    engram.facts.state("Ada", FactInput(subject="bob", text="Bob lives in Oslo", importance=2))
    engram.views.ensure(names=["importance"])
    reads = engram.views.importance
    rows = reads.top(being, limit=5)
    assert [(r["kind"], r["poignancy"], r["method"]) for r in rows] == [
        ("message", 9, "heuristic"),
        ("fact", 7, "given"),
        ("message", 2, "heuristic"),
    ]
    assert reads.cumulative(being) == 18
    first = min(r["position"] for r in rows)
    assert reads.cumulative(being, after_position=first) == 16
    engram.facts.state("Ada", FactInput(subject="bob", text="Bob lives in Oslo", importance=2))
    engram.views.ensure(names=["importance"])
    assert reads.cumulative(being) == 18 + 3  # restated: reinforced to importance 3 (poignancy 10)


def test_a_running_worker_puts_a_scheduled_being_to_sleep_by_itself(
    make_settings: Any, clock: SteppingClock
) -> None:
    import time

    from engram.services.bootstrap import bootstrap
    from engram.services.worker import Worker
    from tests.support import SeededIds

    engram = bootstrap(make_settings(sleep_interval_s=0.05), clock=clock, ids=SeededIds())
    try:
        _steps(engram, CountingStep("links", "dreaming", 2))
        engram.beings.register("Ada")
        engram.beings.set_sleep_schedule("Ada", start_hour=22, duration_hours=6, min_awake_ticks=0)
        clock.current = NIGHT
        worker = Worker(engram.views, names=["beings", "sleep"], sleep=engram.sleep.worker_round)
        worker.start()
        try:
            deadline = time.monotonic() + 60
            mode = engram.sleep.mode("Ada")
            while mode.phase != "dreaming" and time.monotonic() < deadline:
                time.sleep(0.1)
                mode = engram.sleep.mode("Ada")
        finally:
            worker.stop()
        assert mode.mode == "asleep" and mode.phase == "dreaming"
        assert mode.recent[-1].event == "fell_asleep" and mode.recent[-1].reason == "schedule"
    finally:
        engram.close()


def test_a_deferred_wake_cuts_a_stuck_compacting_short_after_its_limit(
    engram: Engram, being: UUID, clock: SteppingClock
) -> None:
    from engram.domain.sleep import MAX_WAKE_DEFERRAL

    class Broken(CountingStep):
        def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
            raise RuntimeError("embedder gone")

    _steps(engram, Broken("consolidation", "compacting", 1))
    engram.sleep.sleep("Ada", hours=1)
    clock.current += timedelta(hours=1)
    first = engram.sleep.tick("Ada")
    assert first.transitions == ["wake deferred until compacting completes (scheduled_end)"]
    assert engram.sleep.tick("Ada").mode == "asleep"  # the failing step still holds the phase
    clock.current += MAX_WAKE_DEFERRAL
    cut = engram.sleep.tick("Ada")
    assert cut.transitions == ["compacting cut short for a deferred wake", "woke up (deferred wake)"]
    assert cut.mode == "awake"
    phase = [e for e in _events(engram, being) if isinstance(e, Sleep.PhaseChanged)]
    assert phase[-1].reason == "deferral_limit"


def test_a_long_sleep_record_loads_from_its_snapshot(engram: Engram, being: UUID) -> None:
    _steps(engram, CountingStep("links", "dreaming", 10_000, per_tick=1))
    engram.sleep.sleep("Ada", hours=4, depth="deep")
    engram.sleep.dream("Ada", ticks=120)
    app = engram.store.log.app
    assert app.snapshots is not None
    assert list(app.snapshots.get(sleep_id_for(being))), "a Sleep of more than 100 events has a snapshot"
    again = app.repository.get(sleep_id_for(being))  # from the snapshot, past the aggregate cache
    assert again.version > 100 and again.mode.value == "asleep" and again.depth.value == "deep"
    assert again.phase is not None and again.phase.value == "dreaming"
