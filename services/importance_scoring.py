"""Sleep's `importance` step (spec 003's compacting, issue #12, ADR 0061): the LLM upgrades the
heuristic importance of a being's memories, a batch at a time.

A tick takes the being's oldest memories still scored by the heuristic (the `importance` view; not
sensitive ones, which never reach an LLM), `BATCH_SIZE` per LLM call and at most `BATCHES_PER_TICK`
calls, asks for a 1–10 score each, checks the answer and records it on the batch's
`ImportanceScoring` (`Scored`, or `Refused` with why). The LLM call happens outside any transaction;
the record is written by a command that reloads the batch and writes nothing if it is settled, so a
tick killed halfway and run again scores nothing twice. An LLM out of reach records nothing and
ends the step for this tick without holding the phase (the memories wait for the next tick or the
next sleep). Without an LLM the step is skipped (the cycle records it once per phase).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog

from engram.domain.importance import POIGNANCY_MAX, POIGNANCY_MIN
from engram.domain.importance_scoring import ImportanceScoring, scoring_id_for
from engram.domain.message import Message
from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.services.importance_prompts import (
    IMPORTANCE_PROMPT_VERSION,
    IMPORTANCE_SYSTEM,
    IMPORTANCE_TASK,
    ImportanceAnswer,
    importance_prompt,
)
from engram.services.llm_answers import capped
from engram.services.patrol.asking import Asked, ask
from engram.services.patrol.proposed_text import Inputs, text_problem
from engram.services.ports import LLM, Clock
from engram.services.runner import CommandRunner
from engram.services.sleep import StepContext, StepResult
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.sleep.importance")

BATCH_SIZE = 15
BATCHES_PER_TICK = 4
NO_LLM = "no LLM configured"


class Refusal(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def checked_scores(asked: Asked, shown: Mapping[str, str]) -> dict[str, int]:
    """The answer's scores by memory id, or `Refusal` saying why it cannot be used. `shown`: short id
    → memory id, as the prompt showed them."""
    if asked.error is not None or not isinstance(asked.plan, ImportanceAnswer):
        code = "bad_response" if asked.bad_response else str(asked.problem.get("code") or "wrong_shape")
        raise Refusal(code, asked.error or "the answer has the wrong shape")
    items = asked.plan.scores
    if not items:
        raise Refusal("empty", "the answer scored no memory")
    scores: dict[str, int] = {}
    for item in items:
        if item.id not in shown:
            problem = text_problem(item.id, Inputs([]), what="an id")
            if problem is not None:
                raise Refusal("instruction", f"the answer's id {item.id[:80]!r}: {problem}")
            raise Refusal("unknown_ids", f"the answer scores {item.id[:80]!r}, which it was not asked about")
        if not POIGNANCY_MIN <= item.score <= POIGNANCY_MAX:
            raise Refusal("out_of_range", f"{item.id}: score {item.score} is not 1 to 10")
        memory_id = shown[item.id]
        if memory_id in scores and scores[memory_id] != item.score:
            raise Refusal("wrong_shape", f"{item.id} is scored twice, differently")
        scores[memory_id] = item.score
    return scores


class ImportanceStep:
    name = "importance"
    phase = "compacting"

    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        views: Callable[[], Any],
        llm: Callable[[], LLM | None],
        being_name: Callable[[UUID], str],
        *,
        max_answer_bytes: int,
        batch_size: int = BATCH_SIZE,
        batches_per_tick: int = BATCHES_PER_TICK,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self._views = views
        self.llm = llm
        self.being_name = being_name
        self.max_answer_bytes = max_answer_bytes
        self.batch_size = batch_size
        self.batches_per_tick = batches_per_tick

    def _reads(self) -> Any:
        views = self._views()
        views.ensure(names=["importance"])
        return views.importance

    def pending(self, being_id: UUID) -> int | None:
        """The memories an LLM would score (None without an LLM: sleep will not score them)."""
        if self.llm() is None:
            return None
        return int(self._reads().llm_pending_count(being_id))

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        llm = self.llm()
        if llm is None or not ctx.llm_available:
            return StepResult(skipped=NO_LLM)
        scored = refused = 0
        codes: dict[str, int] = {}
        for _ in range(self.batches_per_tick):
            if ctx.stopping():
                break
            rows = self._reads().llm_pending(being_id, limit=self.batch_size)
            if not rows:
                return StepResult(done=scored, details={"scored": scored, "refused": refused, **codes})
            outcome = self._batch(llm, being_id, rows)
            if outcome == "deferred":  # the LLM is out of reach: nothing recorded, the phase goes on
                return StepResult(done=scored, details={"scored": scored, "deferred": 1})
            if outcome == "settled":  # recorded meanwhile; the view will show it next tick
                break
            if outcome.startswith("refused:"):
                refused += 1
                code = outcome.split(":", 1)[1]
                codes[code] = codes.get(code, 0) + 1
                break  # asked again next tick
            scored += int(outcome)
        left = self._reads().llm_pending_count(being_id)
        return StepResult(
            done=scored, remaining=left > 0, details={"scored": scored, "refused": refused, **codes}
        )

    def _text(self, row: Mapping[str, Any]) -> str:
        memory_id, kind = UUID(row["id"]), row["kind"]
        if kind == "message":
            return self.store.get(Message, memory_id).text
        if kind == "node":
            node = self.store.get(MemoryNode, memory_id)
            return node.scene_model().to_text(node.feeling)
        return self.store.get(Note, memory_id).text

    def _batch(self, llm: LLM, being_id: UUID, rows: Sequence[Mapping[str, Any]]) -> str:
        ids = [str(r["id"]) for r in rows]
        found = self.store.find(ImportanceScoring, scoring_id_for(being_id, ids))
        if found is not None and found.settled:
            return "settled"
        shown = {f"m{i}": memory_id for i, memory_id in enumerate(ids, 1)}
        prompt = importance_prompt(
            self.being_name(being_id),
            [(short, str(r["kind"]), self._text(r)) for (short, r) in zip(shown, rows, strict=True)],
        )
        asked = ask(
            llm,
            IMPORTANCE_TASK,
            prompt,
            ImportanceAnswer,
            "fast",
            max_answer_bytes=self.max_answer_bytes,
            system=IMPORTANCE_SYSTEM,
            prompt_version=IMPORTANCE_PROMPT_VERSION,
        )
        if asked.transient:
            log.warning("importance scoring deferred", being_id=str(being_id), reason=asked.error)
            return "deferred"
        answer = capped(asked.raw, self.max_answer_bytes) if asked.raw else None
        try:
            scores: dict[str, int] | None = checked_scores(asked, shown)
            refusal: Refusal | None = None
        except Refusal as exc:
            scores, refusal = None, exc

        def handle() -> str:
            s = self.store.find(ImportanceScoring, scoring_id_for(being_id, ids))
            if s is None:
                s = ImportanceScoring.open(being_id, ids, self.clock.now())
            if s.settled:
                return "settled"
            at, model, version = self.clock.now(), asked.model, IMPORTANCE_PROMPT_VERSION
            if refusal is not None:
                s.refused(
                    refusal.code, refusal.reason, model=model, prompt_version=version, answer=answer, at=at
                )
                outcome = f"refused:{refusal.code}"
            else:
                assert scores is not None
                s.scored(scores, model=model, prompt_version=version, answer=answer, at=at)
                outcome = str(len(scores))
            self.store.save(s)
            return outcome

        outcome: str = self.runner.run("score_importance", handle, being_id=being_id)
        if refusal is not None:
            log.warning("importance answer refused", being_id=str(being_id), code=refusal.code)
        return outcome
