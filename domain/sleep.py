"""Sleep (spec 003, issue #12, ADR 0060): a being's mode, its sleep phases, and when it changes.

A being is `awake` or `asleep`; asleep runs the phase `compacting` (what is still unprocessed gets
processed) and then `dreaming` (links, entity profiles, reflection, pruning, compaction). The
`Sleep` aggregate of a being records every transition with its reason; the worker's sleep ticks (a
process manager, `services/sleep.py`) decide them with `due_transition` from the being's
`SleepSchedule`, the clock and the urgent messages the `sleep` view saw, and run the phases' steps.

A wake asked for while `compacting` is deferred until the phase completes, and the deferral is
recorded once. Waking starts a cooldown before sleep may start again. "Activity" (spec 003's
`min_awake_ticks`) is counted in time, `min_awake_ticks × tick_awake_s` since the being last woke:
counting ticks as events would write one event per being every five seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition


class Mode(StrEnum):
    AWAKE = "awake"
    ASLEEP = "asleep"


class Phase(StrEnum):
    COMPACTING = "compacting"
    DREAMING = "dreaming"


class Depth(StrEnum):
    """Light sleep wakes for an urgent message; deep sleep only at its end or when told."""

    LIGHT = "light"
    DEEP = "deep"


class WakeOutcome(StrEnum):
    WOKE = "woke"
    DEFERRED = "deferred"  # asked while compacting: wakes when the phase completes


MAX_TICK_S = 3600
MAX_COOLDOWN_MINUTES = 24 * 60
MAX_MIN_AWAKE_TICKS = 100_000
MAX_STEP_NAME_CHARS = 64
MAX_REASON_CHARS = 200

MAX_WAKE_DEFERRAL = timedelta(minutes=15)
"""A deferred wake waits for compacting at most this long: a step that fails every tick must not keep
a being asleep past its end (the phase is then cut short, with the reason `deferral_limit`)."""

DIRECT_CHANNELS = frozenset({"direct", "dm"})
"""Channels whose messages are direct messages to the being (spec 003's `direct_message`)."""
URGENT_PRIORITY = 8
"""A user message with this priority or more is urgent (spec 003: `metadata.priority >= 8`)."""


def sleep_id_for(being_id: UUID) -> UUID:
    return uuid5(being_id, "sleep")


def _whole(value: Any, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{what} is a whole number from {low} to {high}", field=field)
    return value


@dataclass(frozen=True)
class SleepSchedule:
    """A being's sleep schedule (spec 003 §7). The window is in UTC hours and may wrap past
    midnight (22:00 for 6 hours ends at 04:00)."""

    enabled: bool = False
    start_hour: int = 2
    duration_hours: int = 4
    min_awake_ticks: int = 10
    tick_awake_s: int = 5
    tick_asleep_s: int = 60
    cooldown_minutes: int = 60
    depth: str = Depth.LIGHT.value

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise InvalidInput("enabled is true or false", field="enabled")
        _whole(self.start_hour, "start_hour", 0, 23, "a sleep window's start hour")
        _whole(self.duration_hours, "duration_hours", 1, 23, "a sleep window's length in hours")
        _whole(self.min_awake_ticks, "min_awake_ticks", 0, MAX_MIN_AWAKE_TICKS, "min_awake_ticks")
        _whole(self.tick_awake_s, "tick_awake_s", 1, MAX_TICK_S, "the awake tick in seconds")
        _whole(self.tick_asleep_s, "tick_asleep_s", 1, MAX_TICK_S, "the asleep tick in seconds")
        _whole(self.cooldown_minutes, "cooldown_minutes", 0, MAX_COOLDOWN_MINUTES, "the cooldown in minutes")
        if self.depth not in {d.value for d in Depth}:
            raise InvalidInput("depth is light or deep", field="depth")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SleepSchedule:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(f"unknown schedule field {unknown[0]!r}", field=unknown[0])
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def in_window(self, now: datetime) -> bool:
        return (now.hour - self.start_hour) % 24 < self.duration_hours

    def window_around(self, now: datetime) -> tuple[datetime, datetime]:
        """The window `now` falls in, or else the next one: (start, end)."""
        start = now.replace(hour=self.start_hour, minute=0, second=0, microsecond=0)
        if start > now:
            start -= timedelta(days=1)
        end = start + timedelta(hours=self.duration_hours)
        if now >= end:
            start += timedelta(days=1)
            end += timedelta(days=1)
        return start, end

    @property
    def min_awake(self) -> timedelta:
        return timedelta(seconds=self.min_awake_ticks * self.tick_awake_s)

    @property
    def cooldown(self) -> timedelta:
        return timedelta(minutes=self.cooldown_minutes)


def is_urgent(*, role: str, channel: str | None, urgent: bool, priority: int | None) -> bool:
    """Spec 003's urgent events: a user's direct message, `urgent: true`, or `priority ≥ 8`."""
    if role != "user":
        return False
    direct = channel is not None and channel.strip().lower() in DIRECT_CHANNELS
    return urgent or direct or (priority is not None and priority >= URGENT_PRIORITY)


@dataclass(frozen=True)
class Transition:
    """What a tick should do: fall asleep (with the time to wake) or wake, and why."""

    to: Mode
    reason: str
    wake_at: datetime | None = None


def due_transition(
    *,
    mode: Mode,
    since: datetime | None,
    wake_at: datetime | None,
    depth: Depth,
    cooldown_until: datetime | None,
    schedule: SleepSchedule,
    now: datetime,
    urgent_at: datetime | None,
) -> Transition | None:
    """The transition due now, if any. `since`: when the current mode began (None: awake since the
    being was registered); `urgent_at`: when the latest urgent message arrived (intake clock)."""
    if mode is Mode.ASLEEP:
        if wake_at is not None and now >= wake_at:
            return Transition(Mode.AWAKE, "scheduled_end")
        if depth is Depth.LIGHT and urgent_at is not None and (since is None or urgent_at >= since):
            return Transition(Mode.AWAKE, "urgent_message")
        return None
    if not schedule.enabled or not schedule.in_window(now):
        return None
    if since is not None and now - since < schedule.min_awake:
        return None
    start, end = schedule.window_around(now)
    if cooldown_until is not None and now < cooldown_until:
        return None
    reason = "cooldown_over" if cooldown_until is not None and cooldown_until > start else "schedule"
    return Transition(Mode.ASLEEP, reason, end)


def _reason(reason: str) -> str:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"a reason has 1 to {MAX_REASON_CHARS} characters", field="reason")
    if any(not ch.isprintable() for ch in reason):
        raise InvalidInput("a reason must not contain control characters", field="reason")
    return reason.strip()


class Sleep(BeingScopedAggregate):
    """A being's mode and sleep phase; one per being, id `sleep_id_for(being_id)`."""

    TOPIC = "engram.Sleep"

    class Event(Aggregate.Event):
        TOPIC = "engram.Sleep.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        """The record of a being's sleep opened (the being awake), in the transaction of its first
        transition."""

        TOPIC = "engram.Sleep.Started"
        class_version = 1

    class FellAsleep(Event):
        TOPIC = "engram.Sleep.FellAsleep"
        class_version = 1
        reason: str
        depth: str
        wake_at: datetime | None

        def apply(self, s: Sleep) -> None:
            s.mode = Mode.ASLEEP
            s.phase = Phase.COMPACTING
            s.depth = Depth(self.depth)
            s.since = self.timestamp
            s.wake_at = self.wake_at
            s.deferred = None
            s.skipped = []
            s.ticks = 0
            s.sleeps += 1

    class PhaseChanged(Event):
        TOPIC = "engram.Sleep.PhaseChanged"
        class_version = 1
        phase: str
        reason: str

        def apply(self, s: Sleep) -> None:
            s.phase = Phase(self.phase)
            s.skipped = []

    class WakeDeferred(Event):
        """A wake asked for while compacting: it happens when the phase completes (spec 003)."""

        TOPIC = "engram.Sleep.WakeDeferred"
        class_version = 1
        reason: str

        def apply(self, s: Sleep) -> None:
            s.deferred = self.reason
            s.deferred_at = self.timestamp

    class WokeUp(Event):
        TOPIC = "engram.Sleep.WokeUp"
        class_version = 1
        reason: str
        cooldown_until: datetime | None
        was_deferred: bool

        def apply(self, s: Sleep) -> None:
            s.mode = Mode.AWAKE
            s.phase = None
            s.since = self.timestamp
            s.wake_at = None
            s.deferred = None
            s.skipped = []
            s.cooldown_until = self.cooldown_until

    class StepSkipped(Event):
        """A step of the phase that could not run (e.g. no LLM configured), recorded once per phase."""

        TOPIC = "engram.Sleep.StepSkipped"
        class_version = 1
        phase: str
        step: str
        reason: str

        def apply(self, s: Sleep) -> None:
            s.skipped = [*s.skipped, self.step]

    class Dreamt(Event):
        """One sleep tick that did something: how much each step did (items per step name)."""

        TOPIC = "engram.Sleep.Dreamt"
        class_version = 1
        phase: str
        tick: int
        did: dict[str, int]

        def apply(self, s: Sleep) -> None:
            s.ticks = self.tick

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        # Kept as plain strings, which a snapshot (JSON) gives back as they were; read as enums.
        self._mode: str = Mode.AWAKE.value
        self._phase: str | None = None
        self._depth: str = Depth.LIGHT.value
        self.since: datetime | None = None
        self.wake_at: datetime | None = None
        self.cooldown_until: datetime | None = None
        self.deferred: str | None = None
        self.deferred_at: datetime | None = None
        self.skipped: list[str] = []
        self.ticks = 0
        self.sleeps = 0

    @property
    def mode(self) -> Mode:
        return Mode(self._mode)

    @mode.setter
    def mode(self, value: Mode) -> None:
        self._mode = Mode(value).value

    @property
    def phase(self) -> Phase | None:
        return Phase(self._phase) if self._phase is not None else None

    @phase.setter
    def phase(self, value: Phase | None) -> None:
        self._phase = Phase(value).value if value is not None else None

    @property
    def depth(self) -> Depth:
        return Depth(self._depth)

    @depth.setter
    def depth(self, value: Depth) -> None:
        self._depth = Depth(value).value

    @classmethod
    def start(cls, being_id: UUID, at: datetime) -> Sleep:
        return cls._create(cls.Started, id=sleep_id_for(being_id), being_id=being_id, timestamp=at)

    @property
    def asleep(self) -> bool:
        return self.mode is Mode.ASLEEP

    def fall_asleep(self, reason: str, depth: Depth | str, wake_at: datetime | None, at: datetime) -> None:
        if self.asleep:
            raise InvalidTransition("the being is asleep already", mode=self.mode.value)
        if wake_at is not None and wake_at <= at:
            raise InvalidInput("a sleep ends after it starts", field="wake_at")
        try:
            depth = Depth(depth)
        except ValueError:
            raise InvalidInput("depth is light or deep", field="depth") from None
        self._emit(self.FellAsleep, at, reason=_reason(reason), depth=depth.value, wake_at=wake_at)

    def wake(self, reason: str, cooldown: timedelta, at: datetime) -> WakeOutcome:
        """Wake now, or (while compacting) once the phase completes: the deferral is recorded once."""
        if not self.asleep:
            raise InvalidTransition("the being is awake already", mode=self.mode.value)
        reason = _reason(reason)
        if self.phase is Phase.COMPACTING:
            if self.deferred is None:
                self._emit(self.WakeDeferred, at, reason=reason)
            return WakeOutcome.DEFERRED
        self._woke(reason, cooldown, at, was_deferred=False)
        return WakeOutcome.WOKE

    def _woke(self, reason: str, cooldown: timedelta, at: datetime, *, was_deferred: bool) -> None:
        until = at + cooldown if cooldown > timedelta(0) else None
        self._emit(self.WokeUp, at, reason=reason, cooldown_until=until, was_deferred=was_deferred)

    def deferral_expired(self, at: datetime) -> bool:
        """A wake deferred for longer than `MAX_WAKE_DEFERRAL`: compacting is cut short for it."""
        return (
            self.phase is Phase.COMPACTING
            and self.deferred_at is not None
            and at - self.deferred_at >= MAX_WAKE_DEFERRAL
        )

    def finish_compacting(
        self, cooldown: timedelta, at: datetime, reason: str = "consolidation_done"
    ) -> WakeOutcome | None:
        """Compacting done (or cut short): on to dreaming, then the deferred wake if one was asked for."""
        if self.phase is not Phase.COMPACTING:
            raise InvalidTransition("the being is not compacting", phase=self.phase and self.phase.value)
        self._emit(self.PhaseChanged, at, phase=Phase.DREAMING.value, reason=_reason(reason))
        if self.deferred is not None:
            self._woke(self.deferred, cooldown, at, was_deferred=True)
            return WakeOutcome.WOKE
        return None

    def skip_step(self, step: str, reason: str, at: datetime) -> bool:
        """Records that `step` could not run in this phase; once per phase (False: recorded already)."""
        if not self.asleep or self.phase is None:
            raise InvalidTransition("only a sleeping being skips a step")
        if step in self.skipped:
            return False
        if not step or len(step) > MAX_STEP_NAME_CHARS:
            raise InvalidInput("a step's name has 1 to 64 characters", field="step")
        self._emit(self.StepSkipped, at, phase=self.phase.value, step=step, reason=_reason(reason))
        return True

    def record_tick(self, did: dict[str, int], at: datetime) -> None:
        if not self.asleep or self.phase is None:
            raise InvalidTransition("only a sleeping being dreams")
        clean = {str(k): int(v) for k, v in did.items() if int(v) > 0}
        if clean:
            self._emit(self.Dreamt, at, phase=self.phase.value, tick=self.ticks + 1, did=clean)

    def state(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "phase": self.phase.value if self.phase else None,
            "depth": self.depth.value,
            "since": self.since.isoformat() if self.since else None,
            "wake_at": self.wake_at.isoformat() if self.wake_at else None,
            "cooldown_until": self.cooldown_until.isoformat() if self.cooldown_until else None,
            "deferred_wake": self.deferred,
        }
