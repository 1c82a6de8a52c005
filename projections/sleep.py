"""The sleep view (issue #12, ADR 0060): each being's mode, phase and schedule, the urgent messages
that may wake it, and the history of its transitions.

- `sleep_states`: one row per being — its schedule (the being's `SleepScheduleSet`, or the older
  window events), its mode and phase as the `Sleep` aggregate last recorded them, and the arrival
  time of the latest urgent message (a user's direct message, `urgent`, or priority ≥ 8) received
  while it sleeps lightly: what the sleep ticks wake it for.
- `sleep_transitions`: every transition, deferral, skipped step and tick with its reason, by log
  position: what `engram mode` shows as the recent history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.domain.being import Being
from engram.domain.message import Message
from engram.domain.sleep import Depth, Mode, Sleep, SleepSchedule, is_urgent
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.sql import Row
from engram.projections.tables import Index, TableSpec

SLEEP_STATES = TableSpec(
    name="sleep_states",
    columns={
        "id": "id",  # the being's id
        "schedule": "text",  # JSON: SleepSchedule.as_dict()
        "enabled": "bool",
        "mode": "text",
        "phase": "text",
        "depth": "text",
        "since": "text",  # when the current mode began (None: awake since registration)
        "wake_at": "text",
        "cooldown_until": "text",
        "deferred_wake": "text",
        "sleeps": "int",
        "ticks": "int",  # ticks that did something in the current sleep
        "last_tick_at": "text",
        "urgent_at": "text",  # arrival (intake clock) of the latest urgent message while asleep
        "urgent_message_key": "text",
    },
    indexes=(Index("attention", ("enabled", "mode")),),
)

SLEEP_TRANSITIONS = TableSpec(
    name="sleep_transitions",
    columns={
        "id": "id",  # the event's log position, as text
        "being_id": "id",
        "position": "int",
        "at": "text",
        "event": "text",  # fell_asleep | phase_changed | wake_deferred | woke_up | step_skipped | dreamt
        "mode": "text",
        "phase": "text",
        "reason": "text",
        "details": "text",  # JSON
    },
    indexes=(Index("being", ("being_id", "position")),),
)

VIEW = "sleep"


def _default_row(being_id: str) -> dict[str, Any]:
    schedule = SleepSchedule()
    return {
        "id": being_id,
        "schedule": json.dumps(schedule.as_dict(), sort_keys=True),
        "enabled": False,
        "mode": Mode.AWAKE.value,
        "phase": None,
        "depth": schedule.depth,
        "since": None,
        "wake_at": None,
        "cooldown_until": None,
        "deferred_wake": None,
        "sleeps": 0,
        "ticks": 0,
        "last_tick_at": None,
        "urgent_at": None,
        "urgent_message_key": None,
    }


class SleepView(Projection):
    name = VIEW
    schema_version = 1
    tables = (SLEEP_STATES, SLEEP_TRANSITIONS)

    def _row(self, batch: Batch, being_id: UUID) -> dict[str, Any]:
        row = batch.sleep_states.get(batch.conn, str(being_id))
        return dict(row) if row is not None else _default_row(str(being_id))

    def _set(self, batch: Batch, being_id: UUID, **changes: Any) -> None:
        batch.sleep_states.put({**self._row(batch, being_id), **changes})

    def _history(
        self, batch: Batch, e: Any, event: str, row: dict[str, Any], reason: str | None, **details: Any
    ) -> None:
        batch.sleep_transitions.put(
            {
                "id": str(batch.position),
                "being_id": str(e.being_id),
                "position": batch.position,
                "at": utc_text(e.timestamp),
                "event": event,
                "mode": row["mode"],
                "phase": row["phase"],
                "reason": reason,
                "details": json.dumps(details, sort_keys=True, default=str) if details else None,
            }
        )

    # -- the schedule ----------------------------------------------------------------------------

    @handles(Being.Registered)
    def _registered(self, batch: Batch, e: Being.Registered) -> None:
        batch.sleep_states.put(_default_row(str(e.originator_id)))

    def _schedule(self, batch: Batch, being_id: UUID, schedule: dict[str, Any]) -> None:
        self._set(
            batch,
            being_id,
            schedule=json.dumps(schedule, sort_keys=True),
            enabled=bool(schedule.get("enabled")),
        )

    def _current(self, batch: Batch, being_id: UUID) -> dict[str, Any]:
        return dict(json.loads(self._row(batch, being_id)["schedule"]))

    @handles(Being.SleepScheduleSet)
    def _schedule_set(self, batch: Batch, e: Being.SleepScheduleSet) -> None:
        self._schedule(batch, e.being_id, dict(e.schedule))

    @handles(Being.SleepWindowSet)
    def _window_set(self, batch: Batch, e: Being.SleepWindowSet) -> None:
        current = self._current(batch, e.being_id)
        self._schedule(
            batch,
            e.being_id,
            {**current, "enabled": True, "start_hour": e.start_hour, "duration_hours": e.duration_hours},
        )

    @handles(Being.SleepWindowCleared)
    def _window_cleared(self, batch: Batch, e: Being.SleepWindowCleared) -> None:
        self._schedule(batch, e.being_id, {**self._current(batch, e.being_id), "enabled": False})

    # -- urgent messages -------------------------------------------------------------------------

    @handles(Message.Received)
    def _message(self, batch: Batch, e: Message.Received) -> None:
        if not is_urgent(role=e.role, channel=e.channel, urgent=e.urgent, priority=e.priority):
            return
        row = self._row(batch, e.being_id)
        if row["mode"] != Mode.ASLEEP.value or row["depth"] != Depth.LIGHT.value:
            return
        batch.sleep_states.put(
            {**row, "urgent_at": utc_text(e.timestamp), "urgent_message_key": e.message_key}
        )

    # -- the Sleep aggregate ---------------------------------------------------------------------

    @handles(Sleep.Started)
    def _started(self, batch: Batch, e: Sleep.Started) -> None:
        batch.sleep_states.put(self._row(batch, e.being_id))

    @handles(Sleep.FellAsleep)
    def _fell_asleep(self, batch: Batch, e: Sleep.FellAsleep) -> None:
        row = {
            **self._row(batch, e.being_id),
            "mode": Mode.ASLEEP.value,
            "phase": "compacting",
            "depth": e.depth,
            "since": utc_text(e.timestamp),
            "wake_at": utc_text(e.wake_at) if e.wake_at else None,
            "deferred_wake": None,
            "ticks": 0,
            "urgent_at": None,
            "urgent_message_key": None,
        }
        row["sleeps"] = int(row["sleeps"] or 0) + 1
        batch.sleep_states.put(row)
        self._history(batch, e, "fell_asleep", row, e.reason, depth=e.depth, wake_at=row["wake_at"])

    @handles(Sleep.PhaseChanged)
    def _phase(self, batch: Batch, e: Sleep.PhaseChanged) -> None:
        row = {**self._row(batch, e.being_id), "phase": e.phase}
        batch.sleep_states.put(row)
        self._history(batch, e, "phase_changed", row, e.reason)

    @handles(Sleep.WakeDeferred)
    def _deferred(self, batch: Batch, e: Sleep.WakeDeferred) -> None:
        row = {**self._row(batch, e.being_id), "deferred_wake": e.reason}
        batch.sleep_states.put(row)
        self._history(batch, e, "wake_deferred", row, e.reason)

    @handles(Sleep.WokeUp)
    def _woke(self, batch: Batch, e: Sleep.WokeUp) -> None:
        row = {
            **self._row(batch, e.being_id),
            "mode": Mode.AWAKE.value,
            "phase": None,
            "since": utc_text(e.timestamp),
            "wake_at": None,
            "deferred_wake": None,
            "cooldown_until": utc_text(e.cooldown_until) if e.cooldown_until else None,
            "urgent_at": None,
            "urgent_message_key": None,
        }
        batch.sleep_states.put(row)
        self._history(batch, e, "woke_up", row, e.reason, was_deferred=e.was_deferred)

    @handles(Sleep.StepSkipped)
    def _skipped(self, batch: Batch, e: Sleep.StepSkipped) -> None:
        self._history(batch, e, "step_skipped", self._row(batch, e.being_id), e.reason, step=e.step)

    @handles(Sleep.Dreamt)
    def _dreamt(self, batch: Batch, e: Sleep.Dreamt) -> None:
        row = {**self._row(batch, e.being_id), "ticks": e.tick, "last_tick_at": utc_text(e.timestamp)}
        batch.sleep_states.put(row)
        self._history(batch, e, "dreamt", row, None, tick=e.tick, did=dict(e.did))


class SleepReads:
    """Queries on the sleep view (`read` is a `ReadModels`; `ensure()` first)."""

    def __init__(self, read: Any) -> None:
        self.read = read

    def _select(self, spec: TableSpec, where: str, params: Sequence[Any], tail: str = "") -> list[Row]:
        return list(self.read._select(VIEW, spec, where, params, tail))

    def state(self, being_id: UUID) -> Row | None:
        rows = self._select(SLEEP_STATES, "id = ?", [str(being_id)])
        return rows[0] if rows else None

    def states(self, *, attention_only: bool = False) -> list[Row]:
        """Every being's row; `attention_only`: only those a tick may have to change — asleep, or with
        a schedule on."""
        if attention_only:
            return self._select(SLEEP_STATES, "enabled OR mode = ?", [Mode.ASLEEP.value], "ORDER BY id")
        return self._select(SLEEP_STATES, "1 = 1", [], "ORDER BY id")

    def transitions(self, being_id: UUID, *, limit: int = 20, events: Sequence[str] = ()) -> list[Row]:
        """The being's latest transitions (and deferrals, skips, ticks), the newest first."""
        where, params = "being_id = ?", [str(being_id)]
        if events:
            where += f" AND event IN ({', '.join('?' for _ in events)})"
            params += list(events)
        return self._select(SLEEP_TRANSITIONS, where, params, f"ORDER BY position DESC LIMIT {int(limit)}")
