"""The beings view: names, current cycle, soul, think_md, and the diary by date."""

from __future__ import annotations

from typing import Any

from engram.domain.being import Being
from engram.projections.engine import Batch, Projection, handles
from engram.projections.tables import Index, TableSpec

BEINGS = TableSpec(
    name="beings",
    columns={
        "id": "id",
        "name": "text",
        "cycle": "int",
        "soul": "text",
        "think_md": "text",
        "business_root_id": "id",
        "private_root_id": "id",
        "registered_at": "text",
        "last_cycle_at": "text",
        "sleep_start_hour": "int",
        "sleep_duration_hours": "int",
        "version": "int",
        "position": "int",
    },
    unique=(("name",),),
)

DIARY = TableSpec(
    name="diary",
    columns={
        "id": "text",
        "being_id": "id",
        "date": "text",
        "text": "text",
        "written_at": "text",
        "position": "int",
    },
    indexes=(Index("being_date", ("being_id", "date")),),
)


class BeingsView(Projection):
    name = "beings"
    schema_version = 2  # 2: sleep window
    tables = (BEINGS, DIARY)

    def prefetch(self, batch: Batch, events: Any) -> None:
        batch.beings.prefetch(
            batch.conn, [str(e.originator_id) for e in events if not isinstance(e, Being.Registered)]
        )

    def _update(self, batch: Batch, e: Any, **changes: Any) -> None:
        row = batch.beings.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(
                f"beings view: event {type(e).__qualname__} for unknown being {e.originator_id}"
            )
        row.update(changes, version=e.originator_version, position=batch.position)
        batch.beings.put(row)

    @handles(Being.Registered)
    def _registered(self, batch: Batch, e: Being.Registered) -> None:
        batch.beings.put(
            {
                "id": str(e.originator_id),
                "name": e.name,
                "cycle": 0,
                "soul": "",
                "think_md": "",
                "business_root_id": str(e.business_root_id),
                "private_root_id": str(e.private_root_id),
                "registered_at": e.timestamp.isoformat(),
                "last_cycle_at": None,
                "sleep_start_hour": None,
                "sleep_duration_hours": None,
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(Being.SoulDefined)
    def _soul(self, batch: Batch, e: Being.SoulDefined) -> None:
        self._update(batch, e, soul=e.soul)

    @handles(Being.ThinkMdWritten)
    def _think(self, batch: Batch, e: Being.ThinkMdWritten) -> None:
        self._update(batch, e, think_md=e.think_md)

    @handles(Being.PatrolCycleStarted)
    def _cycle(self, batch: Batch, e: Being.PatrolCycleStarted) -> None:
        self._update(batch, e, cycle=e.cycle, last_cycle_at=e.timestamp.isoformat())

    @handles(Being.SleepWindowSet)
    def _sleep(self, batch: Batch, e: Being.SleepWindowSet) -> None:
        self._update(batch, e, sleep_start_hour=e.start_hour, sleep_duration_hours=e.duration_hours)

    @handles(Being.SleepWindowCleared)
    def _awake(self, batch: Batch, e: Being.SleepWindowCleared) -> None:
        self._update(batch, e, sleep_start_hour=None, sleep_duration_hours=None)

    @handles(Being.SleepScheduleSet)
    def _schedule(self, batch: Batch, e: Being.SleepScheduleSet) -> None:
        on = bool(e.schedule.get("enabled"))
        self._update(
            batch,
            e,
            sleep_start_hour=e.schedule["start_hour"] if on else None,
            sleep_duration_hours=e.schedule["duration_hours"] if on else None,
        )

    @handles(Being.DiaryEntryWritten)
    def _diary(self, batch: Batch, e: Being.DiaryEntryWritten) -> None:
        self._update(batch, e)
        batch.diary.put(
            {
                "id": f"{e.originator_id}:{e.date}",
                "being_id": str(e.originator_id),
                "date": e.date,
                "text": e.text,
                "written_at": e.timestamp.isoformat(),
                "position": batch.position,
            }
        )
