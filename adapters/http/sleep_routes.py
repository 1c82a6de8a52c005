"""The sleep routes (spec 003, issue #12, ADR 0060): a being's schedule, sleeping and waking it now,
its mode, and sleep ticks on demand. Their own router, included by `app.py` before `routes.v1`
(whose `/beings/{being}/{kind}/{item_id}` would take them); `{being}` resolves through
`being_access`, so a being token reaches its own being only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import BAD_JSON, COMMON, CONFLICT
from engram.domain.sleep import MAX_COOLDOWN_MINUTES, MAX_MIN_AWAKE_TICKS, MAX_REASON_CHARS, MAX_TICK_S, Depth
from engram.services.commands import Done
from engram.services.sleep import MAX_DREAM_TICKS, MAX_SLEEP_HOURS, DreamReport, ModeReport

sleep_routes = APIRouter(prefix="/v1", tags=["sleep"], responses={**COMMON})

Reason = Annotated[str, Field(min_length=1, max_length=MAX_REASON_CHARS, description="Recorded with it.")]


class ScheduleChange(BaseModel):
    """Fields of the schedule to change; the others stay. Giving the window turns it on."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    start_hour: int | None = Field(None, ge=0, le=23, description="Hour (UTC) the window starts.")
    duration_hours: int | None = Field(None, ge=1, le=23)
    min_awake_ticks: int | None = Field(None, ge=0, le=MAX_MIN_AWAKE_TICKS)
    tick_awake_s: int | None = Field(None, ge=1, le=MAX_TICK_S)
    tick_asleep_s: int | None = Field(None, ge=1, le=MAX_TICK_S)
    cooldown_minutes: int | None = Field(None, ge=0, le=MAX_COOLDOWN_MINUTES)
    depth: Depth | None = None


class SleepNow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hours: float | None = Field(None, gt=0, le=MAX_SLEEP_HOURS, description="Default: the schedule's.")
    deep: bool = Field(False, description="Deep sleep: urgent messages do not wake it.")
    reason: Reason = "manual"


class WakeNow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Reason = "manual"


class DreamNow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ticks: int | None = Field(None, ge=1, le=MAX_DREAM_TICKS, description="Default: until idle.")


@sleep_routes.put(
    "/beings/{being}/sleep/schedule", name="set_sleep_schedule", response_model=Done, responses={**BAD_JSON}
)
def set_schedule(body: ScheduleChange, being: Being, engram: EngramDep) -> Done:
    """Change the being's sleep schedule; `details.schedule` is the schedule after it."""
    changes = body.model_dump(exclude_none=True, mode="json")
    return engram.beings.set_sleep_schedule(being.ref, **changes)


@sleep_routes.post(
    "/beings/{being}/sleep", name="sleep_now", response_model=Done, responses={**BAD_JSON, **CONFLICT}
)
def sleep_now(being: Being, engram: EngramDep, body: Annotated[SleepNow | None, Body()] = None) -> Done:
    """Put the being to sleep now (409 if it is asleep already)."""
    body = body or SleepNow()
    depth = Depth.DEEP.value if body.deep else None
    return engram.sleep.sleep(being.ref, hours=body.hours, depth=depth, reason=body.reason)


@sleep_routes.post(
    "/beings/{being}/wake", name="wake_now", response_model=Done, responses={**BAD_JSON, **CONFLICT}
)
def wake_now(being: Being, engram: EngramDep, body: Annotated[WakeNow | None, Body()] = None) -> Done:
    """Wake the being: `details.outcome` is `woke`, or `deferred` while it compacts (it wakes when the
    phase completes). 409 if it is awake."""
    return engram.sleep.wake(being.ref, reason=(body or WakeNow()).reason)


@sleep_routes.get("/beings/{being}/mode", name="show_mode", response_model=ModeReport)
def show_mode(being: Being, engram: EngramDep) -> ModeReport:
    """The being's mode, phase, next transition, cooldown, schedule, what is pending, recent transitions."""
    return engram.sleep.mode(being.ref)


@sleep_routes.post(
    "/beings/{being}/dream", name="dream_now", response_model=DreamReport, responses={**BAD_JSON, **CONFLICT}
)
def dream_now(
    being: Being, engram: EngramDep, body: Annotated[DreamNow | None, Body()] = None
) -> DreamReport:
    """Run the being's sleep ticks now (an awake being naps for them). 409 while another process
    ticks it."""
    return engram.sleep.dream(being.ref, ticks=(body or DreamNow()).ticks)
