"""The worker's automatic patrols: on each tick, patrol the beings whose schedule says so."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import structlog

from engram.domain.errors import DomainError
from engram.projections.notes import utc_text
from engram.services.patrol.run import PatrolAlreadyRunning
from engram.services.patrol.schedule import BeingDue, is_due
from engram.services.ports import AutoPatrols

log = structlog.get_logger("engram.patrol.auto")


class AutoPatrol:
    def __init__(self, engram: AutoPatrols) -> None:
        self.e = engram
        self._next_check = 0.0
        self.patrols = 0

    def due(self) -> list[tuple[str, str]]:
        s = self.e.settings
        self.e.views.ensure()
        read = self.e.views.read
        now = self.e.clock.now()
        pending = read.pending_scene_counts(active_at=utc_text(now))
        out = []
        for b in read.beings():
            window = (
                (b["sleep_start_hour"], b["sleep_duration_hours"])
                if b["sleep_start_hour"] is not None
                else None
            )
            last = datetime.fromisoformat(b["last_cycle_at"]) if b["last_cycle_at"] else None
            due, why = is_due(
                BeingDue(b["id"], pending.get(b["id"], 0), last, window),
                now,
                min_notes=s.patrol_min_notes,
                interval=timedelta(minutes=s.patrol_interval_minutes),
                sleep_interval=timedelta(minutes=s.sleep_patrol_interval_minutes),
            )
            if due:
                out.append((b["id"], why))
        return out

    def tick(self) -> None:
        if time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + self.e.settings.patrol_check_s
        for being_id, why in self.due():
            try:
                report = self.e.patrol(being_id)
                self.patrols += 1
                log.info("automatic patrol", being_id=being_id, reason=why, cycle=report.cycle)
            except PatrolAlreadyRunning:
                log.info("patrol already running; next tick", being_id=being_id)
            except DomainError as exc:
                log.warning("automatic patrol refused", being_id=being_id, error=exc.code, reason=exc.message)
            except Exception:
                log.error("automatic patrol failed; next tick retries", being_id=being_id, exc_info=True)
