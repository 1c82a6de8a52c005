"""Sleep as a process manager (spec 003, issue #12, ADR 0060): the ticks that put a being to sleep,
wake it, and run the steps of its phases.

A tick of a being:
1. decides the transition due (`domain.sleep.due_transition`: the schedule's window, the scheduled
   end, an urgent message in light sleep) and records it on the being's `Sleep`;
2. asleep, runs the steps of the current phase, each a bounded amount: `compacting` moves on to
   `dreaming` once none of its steps has anything left (and then wakes if a wake was deferred);
   awake, runs the awake steps (an emergency compaction);
3. records what the tick did (`Sleep.Dreamt`), and once per phase each step that could not run
   (`Sleep.StepSkipped`, e.g. no LLM configured).

The steps live in their own modules and are listed, in their order, by `dream_steps.build_steps`.
Each step is idempotent by its own aggregates' ids and state, so a tick killed halfway is simply
run again. One tick per being at a time, across processes (`sleep:<being id>` lock): the worker's
round and `engram dream` never interleave.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import structlog
from pydantic import BaseModel

from engram.domain.being import Being
from engram.domain.sleep import (
    Depth,
    Mode,
    Phase,
    Sleep,
    SleepSchedule,
    WakeOutcome,
    due_transition,
    sleep_id_for,
)
from engram.services.beings import resolve_being_id
from engram.services.commands import Done
from engram.services.errors import Conflict
from engram.services.ports import Clock, Lock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.sleep")

MAX_DREAM_TICKS = 1000
DEFAULT_DREAM_TICKS = 100
"""`engram dream` without `--ticks`: until a tick finds nothing to do and leaves nothing for the
next, at most this many."""
MAX_SLEEP_HOURS = 23.0

AWAKE = "awake"
"""The phase name of the steps an awake tick runs."""


@dataclass(frozen=True)
class StepContext:
    """What a step is told: the tick's time, the being's mode and phase, whether an LLM is there."""

    now: datetime
    mode: Mode
    phase: str  # compacting | dreaming | awake
    llm_available: bool
    stopping: Callable[[], bool] = lambda: False


@dataclass
class StepResult:
    """What one step did in one tick. `done`: items it handled; `remaining`: it has more to do
    (a compacting step with more keeps the phase); `skipped`: why it could not run at all (recorded
    once per phase); `details`: what `dream --json` shows of it."""

    done: int = 0
    remaining: bool = False
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class DreamStep(Protocol):
    name: str
    phase: str  # compacting | dreaming | awake

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult: ...

    def pending(self, being_id: UUID) -> int | None:
        """How many items the step still has to handle for the being (None: it cannot tell cheaply)."""
        ...


class Transitioned(BaseModel):
    at: str
    event: str
    mode: str
    phase: str | None
    reason: str | None
    details: dict[str, Any] | None = None


class ModeReport(BaseModel):
    being_id: str
    mode: str
    phase: str | None
    depth: str
    since: str | None
    wake_at: str | None
    cooldown_until: str | None
    deferred_wake: str | None
    next_transition: str | None
    """What happens next and when, in words: "wakes at …", "may sleep at …"."""
    schedule: dict[str, Any]
    pending: dict[str, int]
    recent: list[Transitioned]

    def text(self) -> str:
        lines = [f"mode: {self.mode}" + (f" ({self.phase}, {self.depth} sleep)" if self.phase else "")]
        if self.since:
            lines.append(f"since: {self.since}")
        if self.next_transition:
            lines.append(f"next: {self.next_transition}")
        if self.cooldown_until:
            lines.append(f"cooldown until: {self.cooldown_until}")
        if self.deferred_wake:
            lines.append(f"wake deferred ({self.deferred_wake}) until compacting completes")
        s = self.schedule
        lines.append(
            "schedule: "
            + (
                f"{s['start_hour']:02d}:00 UTC for {s['duration_hours']} h, {s['depth']} sleep, "
                f"ticks {s['tick_awake_s']} s awake / {s['tick_asleep_s']} s asleep, "
                f"cooldown {s['cooldown_minutes']} min, at least {s['min_awake_ticks']} awake ticks"
                if s["enabled"]
                else "off"
            )
        )
        if self.pending:
            lines.append("pending: " + ", ".join(f"{k} {v}" for k, v in self.pending.items()))
        for t in self.recent[:5]:
            lines.append(f"  {t.at}  {t.event}" + (f" ({t.reason})" if t.reason else ""))
        return "\n".join(lines)


class TickReport(BaseModel):
    being_id: str
    mode: str
    phase: str | None
    transitions: list[str]
    did: dict[str, int]
    skipped: dict[str, str]
    errors: dict[str, str]
    steps: dict[str, dict[str, Any]]
    remaining: bool = False
    """A step of the phase said it has more to do (or failed, and will be tried again)."""

    @property
    def busy(self) -> bool:
        """Whether the tick changed or did anything, or left work for the next (a `dream` without
        `--ticks` goes on while it does)."""
        return bool(self.transitions or self.did or self.remaining)


class DreamReport(BaseModel):
    being_id: str
    ticks: int
    napped: bool
    """The being was awake: it slept for these ticks only and woke after them."""
    did: dict[str, int]
    skipped: dict[str, str]
    errors: dict[str, str]
    mode: str
    phase: str | None

    def text(self) -> str:
        did = ", ".join(f"{k} {v}" for k, v in self.did.items()) or "nothing to do"
        out = [f"{self.ticks} sleep ticks: {did}"]
        out += [f"skipped {k}: {v}" for k, v in self.skipped.items()]
        out += [f"failed {k}: {v}" for k, v in self.errors.items()]
        out.append(f"now {self.mode}" + (f" ({self.phase})" if self.phase else ""))
        return "\n".join(out)


class BeingBusy(Conflict):
    code = "being_busy"


class SleepCycle:
    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        views: Callable[[], Any],
        steps: Callable[[], Sequence[DreamStep]],
        llm_available: Callable[[], bool],
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self._views = views
        self._steps = steps
        self._llm_available = llm_available
        self._next_tick: dict[str, float] = {}  # being id -> monotonic time of its next worker tick

    # -- reading --------------------------------------------------------------------------------

    def _reads(self) -> Any:
        from engram.projections.sleep import SleepReads

        views = self._views()
        views.ensure(names=["beings", "sleep"])
        return SleepReads(views.read)

    def _sleep(self, being_id: UUID) -> Sleep | None:
        return self.store.find(Sleep, sleep_id_for(being_id))

    def _schedule(self, being_id: UUID) -> SleepSchedule:
        return self.store.get(Being, being_id).schedule

    def mode(self, being_ref: str | UUID) -> ModeReport:
        being_id = resolve_being_id(self.store, being_ref)
        reads = self._reads()
        row = reads.state(being_id) or {}
        schedule = self._schedule(being_id)
        pending: dict[str, int] = {}
        for step in self._steps():
            n = step.pending(being_id)
            if n:
                pending[step.name] = n
        recent = [
            Transitioned(
                at=r["at"],
                event=r["event"],
                mode=r["mode"],
                phase=r["phase"],
                reason=r["reason"],
                details=_json(r["details"]),
            )
            for r in reads.transitions(being_id, limit=10)
        ]
        return ModeReport(
            being_id=str(being_id),
            mode=row.get("mode") or Mode.AWAKE.value,
            phase=row.get("phase"),
            depth=row.get("depth") or schedule.depth,
            since=row.get("since"),
            wake_at=row.get("wake_at"),
            cooldown_until=row.get("cooldown_until"),
            deferred_wake=row.get("deferred_wake"),
            next_transition=self._next_words(row, schedule),
            schedule=schedule.as_dict(),
            pending=pending,
            recent=recent,
        )

    def _next_words(self, row: Any, schedule: SleepSchedule) -> str | None:
        now = self.clock.now()
        if row.get("mode") == Mode.ASLEEP.value:
            if row.get("deferred_wake"):
                return "wakes when compacting completes"
            return f"wakes at {row['wake_at']}" if row.get("wake_at") else "sleeps until woken"
        if not schedule.enabled:
            return None
        start, _ = schedule.window_around(now)
        if start <= now:  # inside the window: as soon as the cooldown and activity allow
            start = now
        cooldown = _parse(row.get("cooldown_until"))
        since = _parse(row.get("since"))
        if cooldown is not None and cooldown > start:
            start = cooldown
        if since is not None and since + schedule.min_awake > start:
            start = since + schedule.min_awake
        if not schedule.in_window(start):
            start, _ = schedule.window_around(start)
        return f"may sleep at {start.isoformat()}"

    # -- commands -------------------------------------------------------------------------------

    def _load_or_start(self, being_id: UUID, at: datetime) -> Sleep:
        found = self._sleep(being_id)
        return found if found is not None else Sleep.start(being_id, at)

    def sleep(
        self,
        being_ref: str | UUID,
        *,
        hours: float | None = None,
        depth: str | None = None,
        reason: str = "manual",
    ) -> Done:
        """Put the being to sleep now: for `hours` (default the schedule's length), lightly unless
        `depth` says deep (default the schedule's)."""
        being_id = resolve_being_id(self.store, being_ref)
        if hours is not None and not 0 < hours <= MAX_SLEEP_HOURS:
            from engram.domain.errors import InvalidInput

            raise InvalidInput(
                f"a sleep lasts more than 0 and at most {MAX_SLEEP_HOURS:g} hours", field="hours"
            )

        def handle() -> Done:
            now = self.clock.now()
            schedule = self._schedule(being_id)
            sleep = self._load_or_start(being_id, now)
            length = timedelta(hours=hours if hours is not None else schedule.duration_hours)
            sleep.fall_asleep(reason, depth or schedule.depth, now + length, now)
            return Done(position=self.store.save(sleep), details=sleep.state())

        return self.runner.run("fall_asleep", handle, being_id=being_id)

    def wake(self, being_ref: str | UUID, *, reason: str = "manual") -> Done:
        """Wake the being now, or once compacting completes (`details.outcome`: woke | deferred)."""
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> Done:
            now = self.clock.now()
            sleep = self._load_or_start(being_id, now)
            outcome = sleep.wake(reason, self._schedule(being_id).cooldown, now)
            position = self.store.save(sleep)
            return Done(position=position, details={"outcome": outcome.value, **sleep.state()})

        return self.runner.run("wake", handle, being_id=being_id)

    # -- ticks ----------------------------------------------------------------------------------

    def _lock(self, being_id: UUID) -> Lock:
        lock: Lock = self._views().named_lock(f"sleep:{being_id}")
        return lock

    def tick(self, being_ref: str | UUID, *, stopping: Callable[[], bool] = lambda: False) -> TickReport:
        """One tick of the being now (transitions, then its phase's steps). Raises `BeingBusy` when
        another process ticks it."""
        being_id = resolve_being_id(self.store, being_ref)
        lock = self._lock(being_id)
        if not lock.try_acquire():
            raise BeingBusy("another process is running this being's sleep tick; try again shortly")
        try:
            return self._tick(being_id, stopping=stopping)
        finally:
            lock.release()

    def _transition(self, being_id: UUID, urgent_at: datetime | None) -> list[str]:
        def handle() -> list[str]:
            now = self.clock.now()
            schedule = self._schedule(being_id)
            sleep = self._sleep(being_id)
            mode = sleep.mode if sleep else Mode.AWAKE
            due = due_transition(
                mode=mode,
                since=sleep.since if sleep else None,
                wake_at=sleep.wake_at if sleep else None,
                depth=sleep.depth if sleep else Depth(schedule.depth),
                cooldown_until=sleep.cooldown_until if sleep else None,
                schedule=schedule,
                now=now,
                urgent_at=urgent_at,
            )
            if due is None or (sleep is not None and sleep.deferred is not None and due.to is Mode.AWAKE):
                return []
            sleep = sleep or Sleep.start(being_id, now)
            if due.to is Mode.ASLEEP:
                sleep.fall_asleep(due.reason, schedule.depth, due.wake_at, now)
                done = [f"fell asleep ({due.reason})"]
            else:
                outcome = sleep.wake(due.reason, schedule.cooldown, now)
                done = [
                    f"woke up ({due.reason})"
                    if outcome is WakeOutcome.WOKE
                    else f"wake deferred until compacting completes ({due.reason})"
                ]
            self.store.save(sleep)
            log.info("sleep transition", being_id=str(being_id), transition=done[0])
            return done

        return self.runner.run("sleep_transition", handle, being_id=being_id)

    def _tick(self, being_id: UUID, *, stopping: Callable[[], bool]) -> TickReport:
        row = self._reads().state(being_id) or {}
        transitions = self._transition(being_id, _parse(row.get("urgent_at")))
        sleep = self._sleep(being_id)
        mode = sleep.mode if sleep else Mode.AWAKE
        phase = sleep.phase.value if sleep and sleep.phase else AWAKE
        ctx = StepContext(
            now=self.clock.now(),
            mode=mode,
            phase=phase,
            llm_available=self._llm_available(),
            stopping=stopping,
        )
        did: dict[str, int] = {}
        skipped: dict[str, str] = {}
        errors: dict[str, str] = {}
        steps_out: dict[str, dict[str, Any]] = {}
        remaining = False
        for step in self._steps():
            if step.phase != phase or stopping():
                continue
            started = time.perf_counter()
            try:
                result = step.run(being_id, ctx)
            except Exception as exc:  # one step's failure never stops the others; the next tick retries
                errors[step.name] = f"{type(exc).__name__}: {exc}"
                remaining = True
                log.error("sleep step failed", being_id=str(being_id), step=step.name, exc_info=True)
                continue
            if result.skipped:
                skipped[step.name] = result.skipped
                continue
            remaining = remaining or result.remaining
            if result.done:
                did[step.name] = result.done
            steps_out[step.name] = {
                "done": result.done,
                "remaining": result.remaining,
                "ms": round((time.perf_counter() - started) * 1000, 1),
                **result.details,
            }
        if mode is Mode.ASLEEP:
            transitions += self._record(
                being_id, phase, did, skipped, finish=not remaining and not stopping()
            )
        after = self._sleep(being_id)
        return TickReport(
            being_id=str(being_id),
            mode=(after.mode if after else Mode.AWAKE).value,
            phase=after.phase.value if after and after.phase else None,
            transitions=transitions,
            did=did,
            skipped=skipped,
            errors=errors,
            steps=steps_out,
            remaining=remaining,
        )

    def _record(
        self, being_id: UUID, phase: str, did: dict[str, int], skipped: dict[str, str], *, finish: bool
    ) -> list[str]:
        def handle() -> list[str]:
            now = self.clock.now()
            sleep = self._sleep(being_id)
            if sleep is None or not sleep.asleep or sleep.phase is None or sleep.phase.value != phase:
                return []  # woken (or moved on) meanwhile: what the steps did is in their own events
            for step, why in skipped.items():
                sleep.skip_step(step, why, now)
            sleep.record_tick(did, now)
            out = []
            cut_short = sleep.deferral_expired(now)
            if (finish or cut_short) and sleep.phase is Phase.COMPACTING:
                reason = "consolidation_done" if finish else "deferral_limit"
                outcome = sleep.finish_compacting(self._schedule(being_id).cooldown, now, reason)
                out.append(
                    "compacting done; dreaming" if finish else "compacting cut short for a deferred wake"
                )
                if outcome is WakeOutcome.WOKE:
                    out.append("woke up (deferred wake)")
            if sleep.pending_events:
                self.store.save(sleep)
            return out

        return self.runner.run("record_sleep_tick", handle, being_id=being_id)

    def dream(
        self,
        being_ref: str | UUID,
        *,
        ticks: int | None = None,
        progress: Callable[[int, TickReport], None] | None = None,
    ) -> DreamReport:
        """Sleep ticks now, whatever the clock and the tick rate: `ticks` of them, or until one finds
        nothing to do. An awake being naps for them: it falls asleep (`dream_command`) and wakes after
        them (`nap_over`, no cooldown; deferred if it is still compacting)."""
        being_id = resolve_being_id(self.store, being_ref)
        if ticks is not None and not 1 <= ticks <= MAX_DREAM_TICKS:
            from engram.domain.errors import InvalidInput

            raise InvalidInput(f"ticks is 1 to {MAX_DREAM_TICKS}", field="ticks")
        lock = self._lock(being_id)
        if not lock.try_acquire():
            raise BeingBusy("another process is running this being's sleep tick; try again shortly")
        try:
            napped = self._nap(being_id)
            total: dict[str, int] = {}
            skipped: dict[str, str] = {}
            errors: dict[str, str] = {}
            n = 0
            report: TickReport | None = None
            for n in range(1, (ticks or DEFAULT_DREAM_TICKS) + 1):
                report = self._tick(being_id, stopping=lambda: False)
                for k, v in report.did.items():
                    total[k] = total.get(k, 0) + v
                skipped.update(report.skipped)
                errors.update(report.errors)
                if progress is not None:
                    progress(n, report)
                if report.mode != Mode.ASLEEP.value or (ticks is None and not report.busy):
                    break
            if napped:
                self._end_nap(being_id)
            after = self._sleep(being_id)
            return DreamReport(
                being_id=str(being_id),
                ticks=n,
                napped=napped,
                did=total,
                skipped=skipped,
                errors=errors,
                mode=(after.mode if after else Mode.AWAKE).value,
                phase=after.phase.value if after and after.phase else None,
            )
        finally:
            lock.release()

    def _nap(self, being_id: UUID) -> bool:
        def handle() -> bool:
            now = self.clock.now()
            sleep = self._load_or_start(being_id, now)
            if sleep.asleep:
                return False
            sleep.fall_asleep("dream_command", Depth.LIGHT, None, now)
            self.store.save(sleep)
            return True

        return self.runner.run("nap", handle, being_id=being_id)

    def _end_nap(self, being_id: UUID) -> None:
        def handle() -> None:
            sleep = self._sleep(being_id)
            if sleep is not None and sleep.asleep:
                sleep.wake("nap_over", timedelta(0), self.clock.now())
                self.store.save(sleep)

        self.runner.run("end_nap", handle, being_id=being_id)

    # -- the worker -----------------------------------------------------------------------------

    def worker_round(self, *, stopping: Callable[[], bool] = lambda: False) -> int:
        """Tick every being whose tick is due (its schedule's tick rate for its mode), and at once an
        asleep one an urgent message came for. Returns the ticks run."""
        reads = self._reads()
        now = time.monotonic()
        ran = 0
        for row in reads.states():
            if stopping():
                break
            being_id = str(row["id"])
            schedule = SleepSchedule.from_dict(_json(row["schedule"]) or {})
            asleep = row["mode"] == Mode.ASLEEP.value
            if not asleep and not schedule.enabled and not self._awake_steps():
                continue
            urgent = asleep and row.get("urgent_at") is not None
            if not urgent and now < self._next_tick.get(being_id, 0.0):
                continue
            self._next_tick[being_id] = now + (schedule.tick_asleep_s if asleep else schedule.tick_awake_s)
            try:
                self.tick(UUID(being_id), stopping=stopping)
                ran += 1
            except BeingBusy:
                continue
            except Exception:
                log.error("sleep tick failed; the next round retries", being_id=being_id, exc_info=True)
        return ran

    def _awake_steps(self) -> bool:
        return any(s.phase == AWAKE for s in self._steps())


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value))


def _json(value: Any) -> Any:
    import json

    if value is None or isinstance(value, dict):
        return value
    return json.loads(value)
