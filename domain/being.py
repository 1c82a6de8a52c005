"""The Being: a persona whose memory Engram keeps."""

from __future__ import annotations

import datetime as _dt
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.cluster import ROOT_NAMES, Cluster
from engram.domain.errors import InvalidInput
from engram.domain.ids import being_id_for_name, normalise_being_name, root_cluster_id
from engram.domain.sleep import SleepSchedule
from engram.domain.text import check_text

MAX_NAME_CHARS = 64
MAX_SOUL_CHARS = 64 * 1024
MAX_THINK_MD_CHARS = 16 * 1024
MAX_DIARY_CHARS = 8 * 1024


def validate_being_name(name: str) -> str:
    clean = normalise_being_name(name)
    if not clean:
        raise InvalidInput("a being's name must not be empty")
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidInput(f"a being's name has at most {MAX_NAME_CHARS} characters")
    check_text("name", clean)
    if any(not ch.isprintable() for ch in clean):
        raise InvalidInput("a being's name must not contain control characters", field="name")
    return clean


def in_sleep_window(hour: int, start_hour: int, duration_hours: int) -> bool:
    """Whether `hour` (0-23) falls in the window, which may wrap past midnight (22:00 for 6 h)."""
    return (hour - start_hour) % 24 < duration_hours


def _check_text(label: str, field: str, text: str, limit: int) -> str:
    if len(text) > limit:
        raise InvalidInput(f"{label} has at most {limit} characters, got {len(text)}", field=field)
    return check_text(field, text)


class Being(BeingScopedAggregate):
    TOPIC = "engram.Being"
    # The state a snapshot holds: version 2 keeps the whole sleep schedule (issue #12, ADR 0060) where
    # version 1 kept only the window, `sleep_window` (start, hours) or None.
    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        window = state.pop("sleep_window", None)
        schedule = SleepSchedule().as_dict()
        if window:
            schedule.update(enabled=True, start_hour=int(window[0]), duration_hours=int(window[1]))
        state["sleep_schedule"] = schedule

    class Event(Aggregate.Event):
        TOPIC = "engram.Being.Event"
        being_id: UUID

    class Registered(Event, Aggregate.Created):
        TOPIC = "engram.Being.Registered"
        class_version = 1
        name: str
        business_root_id: UUID
        private_root_id: UUID

    class SoulDefined(Event):
        TOPIC = "engram.Being.SoulDefined"
        class_version = 1
        soul: str

        def apply(self, being: Being) -> None:
            being.soul = self.soul

    class ThinkMdWritten(Event):
        TOPIC = "engram.Being.ThinkMdWritten"
        class_version = 1
        think_md: str

        def apply(self, being: Being) -> None:
            being.think_md = self.think_md

    class DiaryEntryWritten(Event):
        """Upserts the entry of one date: a second patrol that day replaces it."""

        TOPIC = "engram.Being.DiaryEntryWritten"
        class_version = 1
        date: str
        text: str

        def apply(self, being: Being) -> None:
            being.diary[self.date] = self.text

    class PatrolCycleStarted(Event):
        """Spec ❷. Session counts of all nodes derive from this one event."""

        TOPIC = "engram.Being.PatrolCycleStarted"
        class_version = 1
        cycle: int

        def apply(self, being: Being) -> None:
            being.cycle = self.cycle

    class SleepWindowSet(Event):
        """Spec 003: a daily window (UTC) in which patrols run on the slower sleep schedule."""

        TOPIC = "engram.Being.SleepWindowSet"
        class_version = 1
        start_hour: int
        duration_hours: int

        def apply(self, being: Being) -> None:
            being.sleep_schedule = {
                **being.sleep_schedule,
                "enabled": True,
                "start_hour": self.start_hour,
                "duration_hours": self.duration_hours,
            }

    class SleepWindowCleared(Event):
        TOPIC = "engram.Being.SleepWindowCleared"
        class_version = 1

        def apply(self, being: Being) -> None:
            being.sleep_schedule = {**being.sleep_schedule, "enabled": False}

    class SleepScheduleSet(Event):
        """Spec 003 §7 (issue #12): the whole schedule — window, ticks, cooldown, depth (ADR 0060).
        Supersedes `SleepWindowSet`/`SleepWindowCleared`, which older logs hold and still apply."""

        TOPIC = "engram.Being.SleepScheduleSet"
        class_version = 1
        schedule: dict[str, Any]

        def apply(self, being: Being) -> None:
            being.sleep_schedule = dict(self.schedule)

    def __init__(self, being_id: UUID, name: str, business_root_id: UUID, private_root_id: UUID) -> None:
        self.being_id = being_id
        self.name = name
        self.business_root_id = business_root_id
        self.private_root_id = private_root_id
        self.cycle = 0
        self.soul = ""
        self.think_md = ""
        self.diary: dict[str, str] = {}
        self.sleep_schedule: dict[str, Any] = SleepSchedule().as_dict()

    @classmethod
    def register(cls, name: str, at: datetime) -> tuple[Being, Cluster, Cluster]:
        """A new being and its two root clusters, to be saved in one transaction."""
        clean = validate_being_name(name)
        being_id = being_id_for_name(clean)
        roots = {root: root_cluster_id(being_id, root) for root in ROOT_NAMES}
        being = cls._create(
            cls.Registered,
            id=being_id,
            being_id=being_id,
            name=clean,
            business_root_id=roots["Business"],
            private_root_id=roots["Private"],
            timestamp=at,
        )
        business = Cluster.create_root(roots["Business"], being_id, "Business", at)
        private = Cluster.create_root(roots["Private"], being_id, "Private", at)
        return being, business, private

    @property
    def root_ids(self) -> dict[str, UUID]:
        return {"Business": self.business_root_id, "Private": self.private_root_id}

    def define_soul(self, soul: str, at: datetime) -> None:
        self._emit(self.SoulDefined, at, soul=_check_text("a soul", "soul", soul, MAX_SOUL_CHARS))

    def write_think_md(self, think_md: str, at: datetime) -> None:
        self._emit(
            self.ThinkMdWritten,
            at,
            think_md=_check_text("think_md", "think_md", think_md, MAX_THINK_MD_CHARS),
        )

    def write_diary(self, date: str, text: str, at: datetime) -> None:
        try:
            _dt.date.fromisoformat(date)
        except ValueError:
            raise InvalidInput(f"diary date {date!r} is not YYYY-MM-DD") from None
        self._emit(
            self.DiaryEntryWritten,
            at,
            date=date,
            text=_check_text("a diary entry", "diary", text, MAX_DIARY_CHARS),
        )

    @property
    def schedule(self) -> SleepSchedule:
        return SleepSchedule.from_dict(self.sleep_schedule)

    @property
    def sleep_window(self) -> tuple[int, int] | None:
        s = self.schedule
        return (s.start_hour, s.duration_hours) if s.enabled else None

    def set_sleep_schedule(self, schedule: SleepSchedule, at: datetime) -> None:
        if schedule.as_dict() != self.sleep_schedule:
            self._emit(self.SleepScheduleSet, at, schedule=schedule.as_dict())

    def set_sleep_window(self, start_hour: int, duration_hours: int, at: datetime) -> None:
        if not 0 <= start_hour <= 23:
            raise InvalidInput("a sleep window starts at an hour from 0 to 23", field="start_hour")
        if not 1 <= duration_hours <= 23:
            raise InvalidInput("a sleep window lasts 1 to 23 hours", field="duration_hours")
        self.set_sleep_schedule(
            SleepSchedule.from_dict(
                {
                    **self.sleep_schedule,
                    "enabled": True,
                    "start_hour": start_hour,
                    "duration_hours": duration_hours,
                }
            ),
            at,
        )

    def clear_sleep_window(self, at: datetime) -> None:
        if self.sleep_schedule.get("enabled"):
            self.set_sleep_schedule(SleepSchedule.from_dict({**self.sleep_schedule, "enabled": False}), at)

    def start_patrol_cycle(self, at: datetime) -> int:
        self._emit(self.PatrolCycleStarted, at, cycle=self.cycle + 1)
        return self.cycle

    def summary(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "name": self.name,
            "cycle": self.cycle,
            "roots": {k: str(v) for k, v in self.root_ids.items()},
        }
