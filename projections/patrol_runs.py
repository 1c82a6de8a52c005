"""The patrol-runs view: one row per being and cycle, with its steps and decision count."""

from __future__ import annotations

import json
from typing import Any

from engram.domain.patrol_run import PatrolRun
from engram.projections.engine import Batch, Projection, handles
from engram.projections.tables import Index, TableSpec

RUNS = TableSpec(
    name="patrol_runs",
    columns={
        "id": "id",
        "being_id": "id",
        "cycle": "int",
        "llm": "text",
        "started_at": "text",
        "finished_at": "text",
        "steps_json": "text",
        "decisions": "int",
        "rejected": "int",
        "version": "int",
        "position": "int",
    },
    indexes=(Index("being_cycle", ("being_id", "cycle")),),
)


class PatrolRunsView(Projection):
    name = "patrol_runs"
    schema_version = 1
    tables = (RUNS,)

    def prefetch(self, batch: Batch, events: Any) -> None:
        batch.patrol_runs.prefetch(batch.conn, [str(e.originator_id) for e in events])

    def _row(self, batch: Batch, e: Any) -> dict[str, Any]:
        row = batch.patrol_runs.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(f"patrol_runs view: event for unknown run {e.originator_id}")
        return row

    def _save(self, batch: Batch, row: dict[str, Any], e: Any) -> None:
        row.update(version=e.originator_version, position=batch.position)
        batch.patrol_runs.put(row)

    def _step(self, batch: Batch, e: Any, **entry: Any) -> None:
        row = self._row(batch, e)
        steps = json.loads(row["steps_json"])
        steps[e.step] = {**steps.get(e.step, {}), **entry, "at": e.timestamp.isoformat()}
        row["steps_json"] = json.dumps(steps)
        self._save(batch, row, e)

    @handles(PatrolRun.Started)
    def _started(self, batch: Batch, e: PatrolRun.Started) -> None:
        row = {
            "id": str(e.originator_id),
            "being_id": str(e.being_id),
            "cycle": e.cycle,
            "llm": e.llm,
            "started_at": e.timestamp.isoformat(),
            "finished_at": None,
            "steps_json": "{}",
            "decisions": 0,
            "rejected": 0,
        }
        self._save(batch, row, e)

    @handles(PatrolRun.StepStarted)
    def _step_started(self, batch: Batch, e: PatrolRun.StepStarted) -> None:
        self._step(batch, e, state="started")

    @handles(PatrolRun.StepFinished)
    def _step_finished(self, batch: Batch, e: PatrolRun.StepFinished) -> None:
        self._step(batch, e, state="finished", counts=e.counts, duration_ms=e.duration_ms)

    @handles(PatrolRun.StepSkipped)
    def _step_skipped(self, batch: Batch, e: PatrolRun.StepSkipped) -> None:
        self._step(batch, e, state="skipped", reason=e.reason)

    @handles(PatrolRun.LlmDecisionRecorded)
    def _decision(self, batch: Batch, e: PatrolRun.LlmDecisionRecorded) -> None:
        row = self._row(batch, e)
        row["decisions"] += 1
        row["rejected"] += len(e.rejected)
        self._save(batch, row, e)

    @handles(PatrolRun.Finished)
    def _finished(self, batch: Batch, e: PatrolRun.Finished) -> None:
        row = self._row(batch, e)
        row["finished_at"] = e.timestamp.isoformat()
        self._save(batch, row, e)
