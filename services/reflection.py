"""Reflection during dreaming (Generative Agents, spec 003, issue #12, ADR 0065).

The `reflection` step adds up the importance (1–10, `views.importance`) of the being's memories that
came in after its last reflection; once that reaches `REFLECTION_THRESHOLD` it asks the LLM for
questions about the most important of them, then for insights answering them, each citing the
memories it rests on. The insights become scene notes of high importance (`INSIGHT_POIGNANCY`; patrol
makes them nodes) whose source refs name their sources, saved in one transaction with the
`Reflections.Reflected` event that records the questions, insights, sources, answers and the position
reflected up to (the counter's reset): a re-run tick writes nothing twice. A bad answer is recorded
(`Reflections.Refused`) and asked again next tick; without an LLM the step is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import structlog
from pydantic import BaseModel

from engram.domain.ids import note_id_for_key
from engram.domain.importance import poignancy_to_node_importance
from engram.domain.note import MAX_SOURCE_REF_CHARS, Note, NoteKind
from engram.domain.reflection import (
    INSIGHT_POIGNANCY,
    MAX_INSIGHT_CHARS,
    MAX_INSIGHTS,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONS,
    MAX_SOURCES,
    REFLECTION_THRESHOLD,
    Reflections,
    reflections_id_for,
)
from engram.projections.entity_profiles import gathered_since
from engram.services.beings import resolve_being_id
from engram.services.commands import NoteInput
from engram.services.dream_prompts import (
    DREAM_PROMPT_VERSION,
    INSIGHTS_TASK,
    QUESTIONS_TASK,
    Bad,
    InsightsAnswer,
    Kept,
    Later,
    QuestionsAnswer,
    ask_checked,
    insights_prompt,
    questions_prompt,
    texts_problem,
)
from engram.services.sleep import StepContext, StepResult

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram

log = structlog.get_logger("engram.reflection")
NO_LLM = "no LLM configured"


class Refusal(Exception):
    def __init__(self, reason: str, model: str, answer: str | None) -> None:
        super().__init__(reason)
        self.reason, self.model, self.answer = reason, model, answer


def _source_ref(number: int, ids: list[str]) -> str:
    """`reflection:<n> <kind>:<id> …`, as many whole sources as the note's source ref holds."""
    out = f"reflection:{number}"
    for i in ids:
        if len(out) + 1 + len(i) > MAX_SOURCE_REF_CHARS:
            break
        out += " " + i
    return out


class ReflectionStep:
    name = "reflection"
    phase = "dreaming"

    def __init__(self, engram: Engram, threshold: int = REFLECTION_THRESHOLD) -> None:
        self.e = engram
        self.threshold = threshold

    def _after(self, being_id: UUID) -> int:
        found = self.e.store.find(Reflections, reflections_id_for(being_id))
        return found.up_to_position if found else 0

    def _gathered(self, being_id: UUID, after: int) -> tuple[int, int]:
        """The importance gathered after `after`, and the position of the newest memory counted."""
        self.e.views.ensure(names=["importance"], being=being_id)
        return gathered_since(self.e.views.read, being_id, after)

    def pending(self, being_id: UUID) -> int | None:
        """The importance gathered towards the threshold since the last reflection."""
        return self._gathered(being_id, self._after(being_id))[0]

    def _texts(self, being_id: UUID, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        views = self.e.views
        views.ensure(names=["memory", "facts", "conversations"], being=being_id)
        by_kind: dict[str, list[str]] = {}
        for r in rows:
            by_kind.setdefault(str(r["kind"]), []).append(str(r["id"]))
        facts = views.facts.facts_by_ids(views.facts.owners(being_id), by_kind.get("fact", []))
        messages = views.conversations.messages_by_ids(being_id, by_kind.get("message", []))
        out = []
        for r in rows:
            i = str(r["id"])
            if r["kind"] == "fact":
                out.append(str(facts[i]["text"]) if i in facts else "")
            elif r["kind"] == "message":
                m = messages.get(i)
                out.append(f"{m['user_id'] if m['role'] == 'user' else 'I'}: {m['text']}" if m else "")
            else:
                node = views.read.node(being_id, UUID(i))
                # A sensitive node is never shown to a model (ADR 0046): it is left out of the sources.
                if node is None or node.get("sensitive"):
                    out.append("")
                else:
                    out.append(" — ".join(p for p in (node["action"], node["feeling"]) if p))
        return out

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        after = self._after(being_id)
        total, last = self._gathered(being_id, after)
        if total < self.threshold:
            return StepResult(details={"gathered": total, "threshold": self.threshold})
        if not ctx.llm_available:
            return StepResult(skipped=NO_LLM)
        top = self.e.views.importance.top(being_id, after_position=after, limit=MAX_SOURCES)
        texts = self._texts(being_id, top)
        sources = [
            {"id": str(r["id"]), "kind": str(r["kind"]), "poignancy": int(r["poignancy"])}
            for r, t in zip(top, texts, strict=True)
            if t
        ]
        memories = [t for t in texts if t]
        answers: list[str] = []
        model = ""
        try:
            questions, model = self._questions(memories, answers)
            insights = self._insights(questions, memories, sources, answers)
        except _Deferred as exc:
            log.warning("reflection deferred", reason=str(exc))
            return StepResult(remaining=True, details={"deferred": str(exc)})
        except Refusal as bad:
            self._refuse(being_id, bad)
            return StepResult(remaining=True, details={"refused": bad.reason})
        done = self._record(being_id, after, last, total, questions, insights, sources, model, answers)
        return StepResult(done=done, details={"gathered": total, "insights": len(insights)})

    def _ask(self, task: str, prompt: str, schema: type[BaseModel], answers: list[str]) -> Kept:
        asked = ask_checked(
            self.e.llm, task, prompt, schema, max_answer_bytes=self.e.settings.llm_max_answer_kib * 1024
        )
        if isinstance(asked, Later):
            raise _Deferred(asked.reason)
        if isinstance(asked, Bad):
            raise Refusal(asked.reason, asked.model, asked.answer)
        answers.append(asked.answer or "")
        return asked

    def _questions(self, memories: list[str], answers: list[str]) -> tuple[list[str], str]:
        asked = self._ask(QUESTIONS_TASK, questions_prompt(memories, MAX_QUESTIONS), QuestionsAnswer, answers)
        assert isinstance(asked.plan, QuestionsAnswer)
        questions = [q.strip() for q in asked.plan.questions]
        reason = None
        if not 1 <= len(questions) <= MAX_QUESTIONS:
            reason = f"the answer has {len(questions)} questions, not 1 to {MAX_QUESTIONS}"
        elif any(not q or len(q) > MAX_QUESTION_CHARS for q in questions):
            reason = f"a question has 1 to {MAX_QUESTION_CHARS} characters"
        else:
            reason = texts_problem(questions, memories, "a question")
        if reason is not None:
            raise Refusal(reason, asked.model, asked.answer)
        return questions, asked.model

    def _insights(
        self, questions: list[str], memories: list[str], sources: list[dict[str, Any]], answers: list[str]
    ) -> list[dict[str, Any]]:
        asked = self._ask(
            INSIGHTS_TASK, insights_prompt(questions, memories, MAX_INSIGHTS), InsightsAnswer, answers
        )
        assert isinstance(asked.plan, InsightsAnswer)
        items = asked.plan.insights
        reason = None
        if not 1 <= len(items) <= MAX_INSIGHTS:
            reason = f"the answer has {len(items)} insights, not 1 to {MAX_INSIGHTS}"
        elif any(not i.insight.strip() or len(i.insight.strip()) > MAX_INSIGHT_CHARS for i in items):
            reason = f"an insight has 1 to {MAX_INSIGHT_CHARS} characters"
        elif any(not i.sources or any(not 1 <= n <= len(memories) for n in i.sources) for i in items):
            reason = f"an insight cites no memory, or one not among the {len(memories)} shown"
        else:
            reason = texts_problem([i.insight for i in items], memories, "an insight")
        if reason is not None:
            raise Refusal(reason, asked.model, asked.answer)
        return [
            {
                "text": i.insight.strip(),
                "sources": [
                    f"{sources[n - 1]['kind']}:{sources[n - 1]['id']}" for n in dict.fromkeys(i.sources)
                ],
            }
            for i in items
        ]

    def _refuse(self, being_id: UUID, bad: Refusal) -> None:
        log.warning("reflection answer refused", reason=bad.reason)

        def handle() -> None:
            now = self.e.clock.now()
            r = self.e.store.find(Reflections, reflections_id_for(being_id)) or Reflections.start(
                being_id, now
            )
            r.refuse(bad.reason, bad.model, DREAM_PROMPT_VERSION, bad.answer, now)
            self.e.store.save(r)

        self.e.runner.run("refuse_reflection", handle, being_id=being_id)

    def _record(
        self,
        being_id: UUID,
        after: int,
        last: int,
        total: int,
        questions: list[str],
        insights: list[dict[str, Any]],
        sources: list[dict[str, Any]],
        model: str,
        answers: list[str],
    ) -> int:
        row = self.e.views.read.being(being_id)
        being_name = str(row["name"]) if row else "I"

        def handle() -> int:
            now = self.e.clock.now()
            r = self.e.store.find(Reflections, reflections_id_for(being_id)) or Reflections.start(
                being_id, now
            )
            if r.up_to_position != after:
                return 0  # reflected meanwhile (a re-run, or another process)
            number = r.count + 1
            notes: list[Note] = []
            kept: list[dict[str, Any]] = []
            for n, insight in enumerate(insights, 1):
                key = f"reflection:{being_id}:{number}:{n}"
                scene = {
                    "action": insight["text"],
                    "actors": [being_name],
                    "when": [now.date().isoformat()],
                    "feeling": "",
                    "importance": poignancy_to_node_importance(INSIGHT_POIGNANCY),
                    "themes": ["reflection"],
                }
                text = json.dumps(scene, ensure_ascii=False)
                ref = _source_ref(number, insight["sources"])
                note_input = NoteInput(kind=NoteKind.SCENE, text=text, idempotency_key=key, source_ref=ref)
                note = Note.take(
                    note_id_for_key(being_id, key),
                    being_id,
                    NoteKind.SCENE,
                    text,
                    now,
                    idempotency_key=key,
                    source_ref=ref,
                    lifecycle=note_input.lifecycle(now),
                )
                notes.append(note)
                kept.append({**insight, "note_id": str(note.id)})
            r.reflect(
                up_to_position=last,
                importance=total,
                questions=questions,
                insights=kept,
                sources=sources,
                model=model,
                prompt_version=DREAM_PROMPT_VERSION,
                answers=answers,
                at=now,
            )
            self.e.store.save(r, *notes)
            return len(notes)

        return self.e.runner.run("reflect", handle, being_id=being_id)


class _Deferred(Exception):
    pass


# -- reads ---------------------------------------------------------------------------------------


class ReflectionRecord(BaseModel):
    number: int
    at: str
    importance: int
    up_to_position: int
    questions: list[str]
    insights: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    model: str | None

    def text(self) -> str:
        lines = [f"reflection {self.number} at {self.at} (importance {self.importance}, {self.model}):"]
        lines += [f"  ? {q}" for q in self.questions]
        for i in self.insights:
            lines.append(f"  - {i['text']}  [from {', '.join(i['sources'])}] note {i['note_id']}")
        return "\n".join(lines)


class ReflectionList(BaseModel):
    being_id: str
    gathered: int
    threshold: int
    reflections: list[ReflectionRecord]

    def text(self) -> str:
        head = f"importance gathered since the last reflection: {self.gathered} of {self.threshold}"
        if not self.reflections:
            return head + "\nno reflection yet"
        return "\n".join([head, *(r.text() for r in self.reflections)])


class ReflectionReads:
    def __init__(self, engram: Engram) -> None:
        self.e = engram

    def list(self, being_ref: str | UUID, limit: int = 20) -> ReflectionList:
        being_id = resolve_being_id(self.e.store, being_ref)
        step = ReflectionStep(self.e)
        gathered = step.pending(being_id) or 0
        self.e.views.ensure(names=["profiles"], being=being_id)
        rows = self.e.views.profiles.reflections(being_id, limit)
        return ReflectionList(
            being_id=str(being_id),
            gathered=gathered,
            threshold=step.threshold,
            reflections=[
                ReflectionRecord(
                    number=r["number"],
                    at=r["at"],
                    importance=r["importance"],
                    up_to_position=r["up_to_position"],
                    questions=r["questions"],
                    insights=r["insights"],
                    sources=r["sources"],
                    model=r["model"],
                )
                for r in rows
            ],
        )
