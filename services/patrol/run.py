"""The patrol process manager: reads the views, decides, commands the aggregates, records its progress.

A patrol of one being is a `PatrolRun` (one per cycle). Killed at any point and started again, it
continues the same cycle at its first unfinished step; every step is idempotent and every LLM
decision is stored with its effects, so nothing is asked or applied twice. Two patrols of one being
never interleave: the second fails fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from engram.domain.being import Being
from engram.domain.ids import patrol_run_id
from engram.domain.patrol_run import PatrolRun, PatrolStep, StepState
from engram.projections.notes import utc_text
from engram.services.beings import resolve_being
from engram.services.errors import Conflict
from engram.services.patrol import mechanical, with_llm
from engram.services.patrol.context import Skip, StepContext
from engram.services.patrol.preview import would_be_born
from engram.services.ports import LLM, LLMAnswer, ModelClass, Patrols, T
from engram.services.runner import correlation
from engram.services.thresholds import thresholds_for

log = structlog.get_logger("engram.patrol")

BYOK_MISSING = "[graph] BYOK key not set: skipping ❹❻ diary/think_md (mechanical processing only)"
"""The spec's own log line (its wording and symbols) for a patrol without an LLM key: logged only when
no key is set at all."""
KEY_MISSING = "BYOK key not set"
"""A skipped LLM step's reason when no LLM key is set (the spec's words, kept for existing readers)."""
LLM_TURNED_OFF = "the LLM is turned off (ENGRAM_LLM=none)"
"""A skipped LLM step's reason when the LLM was turned off on purpose (`ENGRAM_LLM=none`)."""

StepFn = Callable[[StepContext], "dict[str, int] | Skip"]

STEPS: dict[PatrolStep, tuple[StepFn | None, bool]] = {
    PatrolStep.NOTES_TO_NODES: (mechanical.notes_to_nodes, False),
    PatrolStep.BIRTH_SUBCLUSTERS: (mechanical.birth_subclusters, False),
    PatrolStep.START_CYCLE: (None, False),  # special: saved together with its StepFinished
    PatrolStep.FLAG_DYING: (mechanical.flag_dying, False),
    PatrolStep.CONSOLIDATE: (with_llm.consolidate, True),
    PatrolStep.REVIVE: (mechanical.revive, False),
    PatrolStep.SPLIT: (with_llm.split, True),
    PatrolStep.MERGE_SMALL: (mechanical.merge_small_clusters, False),
    PatrolStep.DIARY: (with_llm.diary, True),
}


class PatrolAlreadyRunning(Conflict):
    code = "patrol_running"


@dataclass(frozen=True)
class PatrolProgress:
    """Where a running patrol is: its step, the step's items done of total when it counts them, and the
    LLM calls made so far in this run."""

    step: str
    state: str  # "started", "working", "finished", "skipped", "resumed"
    done: int | None = None
    total: int | None = None
    llm_calls: int = 0


class _CountingLLM:
    """The patrol's LLM, counting the calls it makes for the progress report."""

    def __init__(self, inner: LLM, on_call: Callable[[], None]) -> None:
        self.inner = inner
        self.on_call = on_call

    @property
    def available(self) -> bool:
        return self.inner.available

    def describe(self) -> str:
        return self.inner.describe()

    def model_for(self, model_class: ModelClass) -> str:
        return self.inner.model_for(model_class)

    def complete(
        self, *, task: str, system: str, prompt: str, schema: type[T], model_class: ModelClass
    ) -> LLMAnswer:
        try:
            return self.inner.complete(
                task=task, system=system, prompt=prompt, schema=schema, model_class=model_class
            )
        finally:
            self.on_call()


@dataclass
class PatrolReport:
    being_id: str
    being: str
    cycle: int
    dry_run: bool
    llm: str | None
    resumed: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "being_id": self.being_id,
            "being": self.being,
            "cycle": self.cycle,
            "dry_run": self.dry_run,
            "llm": self.llm,
            "resumed": self.resumed,
            "steps": self.steps,
        }


class Patrol:
    def __init__(
        self,
        engram: Patrols,
        llm: LLM | None = None,
        *,
        progress: Callable[[PatrolProgress], None] | None = None,
    ) -> None:
        """`llm` overrides the configured one for this patrol only (a per-request BYOK key);
        `progress` is told each step's start and end, its items as it goes, and the LLM calls made."""
        self.e = engram
        self._llm = llm
        self._progress = progress
        self._llm_calls = 0
        self._step = ""
        self._items: tuple[int | None, int | None] = (None, None)  # the current step's, when it counts

    def _tell(self, state: str) -> None:
        if self._progress is not None:
            self._progress(PatrolProgress(self._step, state, *self._items, self._llm_calls))

    def _advance(self, done: int, total: int) -> None:
        self._items = (done, total)
        self._tell("working")

    def _called_llm(self) -> None:
        self._llm_calls += 1
        self._tell("working")

    def _llm_or_none(self) -> LLM | None:
        llm = self._llm if self._llm is not None else self.e.llm
        if not llm.available:
            return None
        return _CountingLLM(llm, self._called_llm) if self._progress is not None else llm

    def _no_llm_reason(self) -> str:
        """Why the LLM steps are skipped: turned off on purpose (`ENGRAM_LLM=none`), or no key found."""
        return LLM_TURNED_OFF if self.e.settings.llm == "none" else KEY_MISSING

    def run(self, being_ref: str, *, dry_run: bool = False) -> PatrolReport:
        being = resolve_being(self.e.store, being_ref)
        with correlation(being_id=str(being.id), command="patrol"):
            lock = self.e.views.named_lock(f"patrol:{being.id}")
            if not lock.try_acquire():
                raise PatrolAlreadyRunning(
                    f"a patrol of {being.name} is already running; try again when it ends"
                )
            try:
                self.e.views.ensure(being=being.id)
                if dry_run:
                    return self._dry_run(being)
                return self._run(being)
            finally:
                lock.release()

    def _open_run(self, being: Being) -> tuple[PatrolRun, bool]:
        llm = self._llm_or_none()
        for cycle in (being.cycle, being.cycle + 1):
            if cycle < 1:
                continue
            existing = self.e.store.find(PatrolRun, patrol_run_id(being.id, cycle))
            if existing is not None and not existing.finished:
                return existing, True
        run = PatrolRun.start(being.id, being.cycle + 1, llm.describe() if llm else None, self.e.clock.now())
        self.e.store.save(run)
        return run, False

    def _run(self, being: Being) -> PatrolReport:
        llm = self._llm_or_none()
        run, resumed = self._open_run(being)
        report = PatrolReport(
            str(being.id), being.name, run.cycle, False, llm.describe() if llm else None, resumed
        )
        if llm is None:
            if self._no_llm_reason() == KEY_MISSING:
                log.warning(BYOK_MISSING)
            else:
                log.info(
                    "patrol without the LLM: consolidation, splitting and the diary are skipped",
                    reason=LLM_TURNED_OFF,
                )
        embedder = self.e.embedder
        for step, (fn, needs_llm) in STEPS.items():
            self._step, self._items = step.value, (None, None)
            run = self.e.store.get(PatrolRun, run.id)
            state = run.step_state(step)
            if state in (StepState.FINISHED, StepState.SKIPPED):
                report.steps.append({"step": step.value, "resumed_from_log": True, **run.steps[step.value]})
                self._tell("resumed")
                continue
            started = time.perf_counter()
            if needs_llm and llm is None:
                reason = self._no_llm_reason()
                run.skip_step(step, reason, self.e.clock.now())
                self.e.store.save(run)
                report.steps.append({"step": step.value, "state": "skipped", "reason": reason})
                self._tell("skipped")
                continue
            self._tell("started")
            run.start_step(step, self.e.clock.now())
            self.e.store.save(run)
            if step is PatrolStep.START_CYCLE:
                outcome: dict[str, int] | Skip = self._start_cycle(being.id, run.id, started)
            else:
                ctx = StepContext(
                    store=self.e.store,
                    views=self.e.views,
                    embedder=embedder,
                    llm=llm,
                    clock=self.e.clock,
                    ids=self.e.ids,
                    thresholds=thresholds_for(embedder.model_id),
                    being_id=being.id,
                    run_id=run.id,
                    progress=self._advance,
                    max_answer_bytes=self.e.settings.llm_max_answer_kib * 1024,
                )
                assert fn is not None
                outcome = fn(ctx)
            run = self.e.store.get(PatrolRun, run.id)
            duration = round((time.perf_counter() - started) * 1000, 3)
            entry: dict[str, Any]
            if isinstance(outcome, Skip):
                run.skip_step(step, outcome.reason, self.e.clock.now())
                entry = {
                    "step": step.value,
                    "state": "skipped",
                    "reason": outcome.reason,
                    "duration_ms": duration,
                }
            else:
                if run.step_state(step) is StepState.STARTED:
                    run.finish_step(step, outcome, duration, self.e.clock.now())
                entry = {"step": step.value, "state": "finished", "counts": outcome, "duration_ms": duration}
            # Only the run changed here: a step's own writes were caught up by `StepContext.save`, and the
            # patrol-runs view, the one the run's events feed, catches up when the patrol finishes.
            self.e.store.save(run)
            log.info("patrol step", **entry)
            report.steps.append(entry)
            self._tell(entry["state"])
        run = self.e.store.get(PatrolRun, run.id)
        run.finish(self.e.clock.now())
        self.e.views.ensure(self.e.store.save(run))
        return report

    def _start_cycle(self, being_id: UUID, run_id: UUID, started: float) -> dict[str, int]:
        """Spec ❷: one event on the Being, saved with the step's end, so a crash cannot count it twice."""
        being = self.e.store.get(Being, being_id)
        run = self.e.store.get(PatrolRun, run_id)
        if being.cycle < run.cycle:
            being.start_patrol_cycle(self.e.clock.now())
        counts = {"cycle": being.cycle}
        run.finish_step(
            PatrolStep.START_CYCLE,
            counts,
            round((time.perf_counter() - started) * 1000, 3),
            self.e.clock.now(),
        )
        self.e.views.ensure(self.e.store.save(being, run))
        return counts

    def _dry_run(self, being: Being) -> PatrolReport:
        """What a patrol would do now, from the views and the pending notes: the nodes ❶ would create
        with their clusters (the notes embedded for it), and each step's counts. Writes nothing and
        asks no LLM."""
        read = self.e.views.read
        llm = self._llm_or_none()
        cycle = being.cycle + 1
        report = PatrolReport(str(being.id), being.name, cycle, True, llm.describe() if llm else None)
        active_at = utc_text(self.e.clock.now())
        pending = read.notes(being.id, kinds=["scene"], parse_status="pending", active_at=active_at)
        failed = read.notes(being.id, kinds=["scene"], parse_status="failed")
        clusters = read.clusters(being.id)
        dying_now = read.dying_candidates(being.id, cycle)
        fresh = read.nodes(being.id, statuses=["active", "dying"], fresh=True)
        dying = read.nodes(being.id, statuses=["dying"])
        consolidation = {n["cluster_id"] for n in fresh + dying + dying_now}
        born = would_be_born(
            self.e.store,
            self.e.views,
            self.e.embedder,
            being,
            llm_decides_roots=llm is not None,
            active_at=active_at,
        )
        repairable = sum(1 for n in failed if not n["repair_attempts"])
        plan: list[tuple[PatrolStep, dict[str, int], bool]] = [
            (
                PatrolStep.NOTES_TO_NODES,
                {
                    "notes": len(pending),
                    "failed_notes": len(failed),
                    "repairable": repairable,
                    "would_create": len(born),
                },
                False,
            ),
            (PatrolStep.START_CYCLE, {"cycle": cycle}, False),
            (PatrolStep.FLAG_DYING, {"would_flag": len(dying_now)}, False),
            (PatrolStep.CONSOLIDATE, {"clusters_to_consult": len(consolidation)}, True),
            (PatrolStep.REVIVE, {"would_revive": len(read.revivable(being.id))}, False),
            (
                PatrolStep.SPLIT,
                {
                    "clusters_to_consult": sum(
                        1 for c in clusters if not c["is_root"] and c["active_count"] > with_llm.SPLIT_ABOVE
                    )
                },
                True,
            ),
            (
                PatrolStep.MERGE_SMALL,
                {"small_clusters": sum(1 for c in clusters if not c["is_root"] and c["active_count"] <= 2)},
                False,
            ),
            # ADR 0040: the scene notes ❶ would take up (a failed one only for its first repair).
            (PatrolStep.DIARY, {"scene_notes": len(pending) + repairable}, True),
        ]
        for step, counts, needs_llm in plan:
            reason = self._no_llm_reason() if needs_llm and llm is None else None
            if step is PatrolStep.DIARY and reason is None and not counts["scene_notes"]:
                reason = with_llm.NO_SCENE_NOTES
            entry: dict[str, Any] = {
                "step": step.value,
                "state": "would_skip" if reason else "would_run",
                "counts": counts,
            }
            if reason:
                entry["reason"] = reason
            if step is PatrolStep.NOTES_TO_NODES:
                entry["would_create"] = born
            report.steps.append(entry)
        return report
