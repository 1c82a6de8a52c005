"""A patrol process SIGKILLed between steps or inside one, then resumed: same cycle, nothing twice.

The child (`tests/integration/patrol_child.py`) runs a real patrol on the test database and stops
at a chosen point; the parent kills it with SIGKILL, opens the same database afresh and patrols
again. The resumed patrol must continue the same cycle at its first unfinished step, count ❷ once,
turn every note into exactly one node, and ask the LLM nothing it had already decided.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from engram.domain.being import Being
from engram.domain.ids import node_id_for_note, patrol_run_id
from engram.domain.note import Note
from engram.domain.patrol_run import PatrolRun, PatrolStep
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.patrol.context import SAVE_BATCH
from tests.patrol_support import (
    NEUTRAL,
    TOPICS,
    Call,
    ScriptedLLM,
    merge_first_two,
    note_scenes,
    random_scenes,
    scene,
    settings_json,
    topic_scenes,
)

ROOT = Path(__file__).resolve().parents[2]
STEPS = list(PatrolStep)


class Child:
    """`python -m tests.integration.patrol_child …`, its stdout read line by line in a thread."""

    def __init__(self, settings: Settings, mode: str, arg: str, log: Path) -> None:
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.integration.patrol_child",
                    settings_json(settings),
                    "Aria",
                    mode,
                    arg,
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, marker: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line == marker:
                return
            if line is None:
                break
        self.kill()
        tail = self.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"the child never printed {marker!r} (exit {self.proc.returncode}):\n{tail}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def _wait_until_unlocked(engram: Engram, being_id: UUID, timeout: float = 10) -> None:
    """PostgreSQL ends a killed client's session (and its advisory lock) a moment after the kill."""
    lock = engram.views.named_lock(f"patrol:{being_id}")
    deadline = time.monotonic() + timeout
    while not lock.try_acquire():
        assert time.monotonic() < deadline, "the killed patrol's lock was never released"
        time.sleep(0.05)
    lock.release()


def _prepare(settings: Settings, texts: list[str]) -> tuple[UUID, dict[str, str]]:
    """The being and its notes, written by the parent; returns the being and note id by action."""
    with bootstrap(settings) as engram:
        being_id = UUID(engram.beings.register("Aria").being_id)
        note_ids = note_scenes(engram, "Aria", texts)
        actions = [engram.store.get(Note, UUID(n)).scene_input().scene.action for n in note_ids]
    assert len(set(actions)) == len(actions), "the scenario needs one action per note"
    return being_id, dict(zip(actions, note_ids, strict=True))


def _kill_child(settings: Settings, tmp_path: Path, mode: str, arg: str, marker: str) -> None:
    """Run the child until it prints `marker`, then SIGKILL it."""
    child = Child(settings, mode, arg, tmp_path / f"child-{mode}-{arg}.log")
    child.wait_for(marker)
    child.kill()


class Recorder:
    """The resumed run's LLM: ❹ as in the child, and each question's (task, subject) noted at ask time."""

    def __init__(self, engram: Engram, being_id: UUID, note_by_action: dict[str, str]) -> None:
        self.engram, self.being_id, self.note_by_action = engram, being_id, note_by_action
        self.asked: list[tuple[str, str]] = []

        def record(task: str, answer: Any) -> Callable[[Call], Any]:
            def respond(call: Call) -> Any:
                self.asked.append((task, self.subject(call)))
                return answer(call) if callable(answer) else answer

            return respond

        # Only these tasks are expected; anything else raises `UnexpectedCall` and fails the patrol.
        self.llm = ScriptedLLM(
            {task: record(task, NEUTRAL[task]) for task in NEUTRAL}
            | {"consolidate_cluster": record("consolidate_cluster", merge_first_two)},
            fallback={},
        )

    def subject(self, call: Call) -> str:
        if call.task == "classify_root":
            action = call.prompt.rsplit("<memory>", 1)[-1].removesuffix("</memory>")
            return self.note_by_action[action]
        if call.task in ("consolidate_cluster", "split_cluster"):
            # The cluster the shown nodes are in now, as patrol's views see it while it asks.
            rows = self.engram.views.read.nodes(self.being_id, ids=[UUID(i) for i in call.ids])
            [cluster_id] = {r["cluster_id"] for r in rows}
            return str(cluster_id)
        if call.task == "write_diary":
            return "today"
        return "new sub-cluster"  # name_cluster: the subject is the cluster it creates


def _resume_and_check(
    settings: Settings, being_id: UUID, note_by_action: dict[str, str], killed_after: PatrolStep | None
) -> tuple[Engram, PatrolRun, Recorder, dict[str, Any]]:
    """Resume after the kill, check the invariants every crash must keep; return for more checks."""
    engram = bootstrap(settings)
    try:
        return engram, *_resume(engram, being_id, note_by_action, killed_after)
    except BaseException:
        engram.close()
        raise


def _resume(
    engram: Engram, being_id: UUID, note_by_action: dict[str, str], killed_after: PatrolStep | None
) -> tuple[PatrolRun, Recorder, dict[str, Any]]:
    _wait_until_unlocked(engram, being_id)
    before = engram.store.get(PatrolRun, patrol_run_id(being_id, 1))
    assert not before.finished and before.cycle == 1
    if killed_after is not None:  # killed between steps: that step is done, the next one not begun
        done = STEPS[: STEPS.index(killed_after) + 1]
        assert [s for s in STEPS if before.is_done(s)] == done
        assert STEPS[len(done)].value not in before.steps
    pre = dict(before.decisions)
    cycle_before = engram.store.get(Being, being_id).cycle

    recorder = Recorder(engram, being_id, note_by_action)
    report = engram.patrol("Aria", llm=recorder.llm)

    assert report.resumed and report.cycle == 1
    # ❷ counted once: one PatrolCycleStarted, whether the kill came before or after it.
    being = engram.store.get(Being, being_id)
    started = [
        e for e in engram.audit.history("being", str(being_id)) if e["type"] == "Being.PatrolCycleStarted"
    ]
    assert being.cycle == 1 and len(started) == 1 and cycle_before in (0, 1)
    run = engram.store.get(PatrolRun, patrol_run_id(being_id, 1))
    assert run.finished and engram.store.find(PatrolRun, patrol_run_id(being_id, 2)) is None
    history = engram.audit.history("patrol-run", str(run.id))
    ends = Counter(
        e["payload"]["step"]
        for e in history
        if e["type"] in ("PatrolRun.StepFinished", "PatrolRun.StepSkipped")
    )
    assert ends == Counter(s.value for s in STEPS), "every step ended exactly once"
    # Every note became exactly one node.
    engram.views.ensure()
    nodes = engram.views.read.nodes(being_id)
    assert len(nodes) == len(note_by_action)
    assert {n["source_note_id"] for n in nodes} == set(note_by_action.values())
    for note_id in note_by_action.values():
        note = engram.store.get(Note, UUID(note_id))
        assert note.parse_status == "processed" and note.node_id == node_id_for_note(note.id)
        assert [e["type"] for e in engram.audit.history("note", note_id)].count("Note.Processed") == 1
    # Each decision recorded once, and none asked again after the kill.
    recorded = Counter(
        f"{e['payload']['task']}:{e['payload']['subject']}"
        for e in history
        if e["type"] == "PatrolRun.LlmDecisionRecorded"
    )
    assert recorded and max(recorded.values()) == 1
    repeated = [
        (task, subject)
        for task, subject in recorder.asked
        if f"{task}:{subject}" in pre
        or (task == "write_diary" and any(k.startswith("write_diary:") for k in pre))
    ]
    assert repeated == [], "the resumed patrol asked again what was decided before the kill"
    # Every merge applied once: a survivor gains 0.05 once, an absorbed node dies once.
    for node in nodes:
        events = [e["type"] for e in engram.audit.history("node", node["id"])]
        assert events.count("MemoryNode.AbsorbedNodes") <= 1 and events.count("MemoryNode.Absorbed") <= 1
        if "MemoryNode.AbsorbedNodes" in events:
            assert node["importance"] == pytest.approx(0.55)
    return run, recorder, pre


def _topic(name: str) -> list[str]:
    """Four scenes of a topic and a fifth of importance 0.05, dying from its first patrol."""
    base, date = TOPICS[name]
    return [*topic_scenes(name, 4), scene(f"{base} once more", date, importance=0.05)]


# Two memories of one walk, left in the Private root (two are too few for a sub-cluster): alike enough
# (cosine 0.40) for ❹'s merge floor (ADR 0027), so `merge_first_two` merges in the root as in each topic.
ROOT_PAIR = [
    scene("Walked the dog along the river", "2021-01-03"),
    scene("Walked the dog, then painted a watercolor of tulips", "2022-02-14"),
]

CLUSTERED = [
    *_topic("climbing"),
    *_topic("baking"),
    *_topic("chess"),
    *_topic("sailing"),
    *ROOT_PAIR,
]


@pytest.mark.parametrize(
    "after", [PatrolStep.NOTES_TO_NODES, PatrolStep.START_CYCLE, PatrolStep.CONSOLIDATE, PatrolStep.SPLIT]
)
def test_killed_between_steps_resumes_at_the_next_step(
    make_settings, tmp_path: Path, after: PatrolStep
) -> None:
    settings = make_settings()
    being_id, notes = _prepare(settings, CLUSTERED)
    _kill_child(settings, tmp_path, "between", after.value, f"between {after.value}")

    engram, run, recorder, pre = _resume_and_check(settings, being_id, notes, after)
    try:
        asked_tasks = Counter(task for task, _ in recorder.asked)
        assert (
            asked_tasks["classify_root"] == 0
        )  # ❶ was done before every kill point: its decisions are reused
        assert sum(1 for k in pre if k.startswith("classify_root:")) == len(notes)
        if STEPS.index(after) >= STEPS.index(PatrolStep.CONSOLIDATE):
            assert asked_tasks["consolidate_cluster"] == 0
        else:
            assert asked_tasks["consolidate_cluster"] == 5  # four topics and the Private root
        assert sum(1 for k in run.decisions if k.startswith("consolidate_cluster:")) == 5
        assert sum(1 for k in run.decisions if k.startswith("name_cluster:")) == 4
    finally:
        engram.close()


def test_killed_inside_notes_to_nodes_after_a_batch_resumes_the_rest(make_settings, tmp_path: Path) -> None:
    settings = make_settings()
    texts = random_scenes(3 * SAVE_BATCH)
    being_id, notes = _prepare(settings, texts)
    _kill_child(settings, tmp_path, "notes-chunk", "1", "saved chunk 1")

    with bootstrap(settings) as engram:
        engram.views.ensure()
        processed = engram.views.read.notes(being_id, parse_status="processed")
        assert len(processed) == SAVE_BATCH  # one batch committed, two to go
        run = engram.store.get(PatrolRun, patrol_run_id(being_id, 1))
        assert (
            run.step_state(PatrolStep.NOTES_TO_NODES) == "started"
            and run.next_step() is PatrolStep.NOTES_TO_NODES
        )
        assert engram.store.get(Being, being_id).cycle == 0

    engram, run, recorder, _pre = _resume_and_check(settings, being_id, notes, None)
    try:
        asked = [subject for task, subject in recorder.asked if task == "classify_root"]
        assert len(asked) == 2 * SAVE_BATCH and not {p["id"] for p in processed} & set(asked)
        assert len([k for k in run.decisions if k.startswith("classify_root:")]) == 3 * SAVE_BATCH
        counts = run.steps["notes_to_nodes"]["counts"]
        assert counts["nodes_created"] == 2 * SAVE_BATCH  # the resumed part only: nothing made twice
    finally:
        engram.close()


def test_killed_inside_a_notes_transaction_loses_nothing_and_doubles_nothing(
    make_settings, tmp_path: Path
) -> None:
    settings = make_settings()
    texts = random_scenes(3 * SAVE_BATCH)
    being_id, notes = _prepare(settings, texts)
    _kill_child(settings, tmp_path, "notes-race", "2", "saving chunk 2")  # lands in or near that commit

    with bootstrap(settings) as engram:
        engram.views.ensure()
        processed = len(engram.views.read.notes(being_id, parse_status="processed"))
        assert processed in (SAVE_BATCH, 2 * SAVE_BATCH), processed  # the batch is all or nothing
        assert len(engram.views.read.nodes(being_id)) == processed

    engram, *_ = _resume_and_check(settings, being_id, notes, None)
    engram.close()


def test_killed_while_the_llm_thinks_in_consolidation_reuses_the_clusters_decided(
    make_settings, tmp_path: Path
) -> None:
    settings = make_settings()
    being_id, notes = _prepare(settings, CLUSTERED)
    _kill_child(settings, tmp_path, "consolidate", "2", "asked cluster 3")

    engram, run, recorder, pre = _resume_and_check(settings, being_id, notes, None)
    try:
        decided = {k.split(":", 1)[1] for k in pre if k.startswith("consolidate_cluster:")}
        assert len(decided) == 2
        asked = [subject for task, subject in recorder.asked if task == "consolidate_cluster"]
        assert len(asked) == 3 and not decided & set(asked)
        assert {
            k.split(":", 1)[1] for k in run.decisions if k.startswith("consolidate_cluster:")
        } == decided | set(asked)
        assert Counter(task for task, _ in recorder.asked)["classify_root"] == 0
        assert run.steps["consolidate"]["counts"]["merged"] == 3  # the resumed part: 3 clusters, 1 merge each
        survivors = [n for n in engram.views.read.nodes(being_id) if n["importance"] > 0.5]
        assert len(survivors) == 5  # one merge per cluster, applied once
    finally:
        engram.close()
