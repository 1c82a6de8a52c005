"""Writing one summary: an LLM's answer, checked, or the extractive method (ADR 0053).

Nothing here writes an event. It returns what the summariser records: a `Written` summary (how it
was made, the model, the prompt version and the capped answer), a `Refused` answer (recorded as
`SummaryRejected`, the work staying due for its next trigger) or `Deferred` (the LLM could not be
reached: nothing to record, the next trigger asks again).

An answer is refused when it holds no answer (an HTML page, an empty body), has the wrong shape, is
over the answer cap, breaks the domain's bounds, holds markup, or reads like an instruction to a
model or copies one from a message (the guards patrol uses, `proposed_text`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from engram.domain.conversation import (
    MAX_ROLLING_CHARS,
    SummaryKind,
    SummaryMethod,
    check_session_summary,
    check_spine,
)
from engram.domain.errors import InvalidInput
from engram.services import summary_extractive as extractive
from engram.services.llm_answers import capped
from engram.services.patrol.asking import ask
from engram.services.patrol.proposed_text import Inputs, text_problem
from engram.services.ports import LLM
from engram.services.summary_prompts import (
    ROLLING_TASK,
    SESSION_TASK,
    SPINE_TASK,
    SUMMARY_PROMPT_VERSION,
    SUMMARY_SYSTEM,
    RollingAnswer,
    SessionAnswer,
    SpineAnswer,
    rolling_prompt,
    session_prompt,
    spine_prompt,
)

# A summary is plain text: markup is a page or an injection, not a summary.
_MARKUP = re.compile(
    r"<\s*/?\s*(?:!doctype|html|head|body|script|style|iframe|div|p|br|a|img)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Written:
    content: Any  # rolling: the text; session: the summary; spine: the sections
    method: SummaryMethod
    model: str | None = None
    prompt_version: str | None = None
    answer: str | None = None

    def recorded(self) -> dict[str, Any]:
        """The keywords the domain's summary commands take for how it was written."""
        return {
            "method": self.method,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "answer": self.answer,
        }


@dataclass(frozen=True)
class Refused:
    kind: SummaryKind
    reason: str
    model: str
    prompt_version: str
    answer: str | None


@dataclass(frozen=True)
class Deferred:
    reason: str


Outcome = Written | Refused | Deferred


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def answer_problem(content: Any, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the checked content of an answer may not be kept: markup, controls, an instruction."""
    inputs = Inputs(str(m["text"]) for m in messages)
    for text in _strings(content):
        if _MARKUP.search(text):
            return "the summary holds markup (HTML)"
        problem = text_problem(text, inputs, what="the summary", line_breaks=True)
        if problem is not None:
            return problem
    return None


class SummaryWriter:
    """Writes rolling summaries, session summaries and spines, with `llm()` when it gives one."""

    def __init__(self, llm: Callable[[], LLM | None], *, max_answer_bytes: int) -> None:
        self.llm = llm
        self.max_answer_bytes = max_answer_bytes

    def _ask(
        self,
        kind: SummaryKind,
        task: str,
        prompt: str,
        schema: type[BaseModel],
        messages: Sequence[Mapping[str, Any]],
        check: Callable[[Any], Any],
    ) -> Outcome:
        llm = self.llm()
        assert llm is not None
        asked = ask(
            llm,
            task,
            prompt,
            schema,
            "fast",
            max_answer_bytes=self.max_answer_bytes,
            system=SUMMARY_SYSTEM,
            prompt_version=SUMMARY_PROMPT_VERSION,
        )
        if asked.transient:
            return Deferred(asked.error or "LLM unavailable")
        answer = capped(asked.raw, self.max_answer_bytes) if asked.raw else None
        reason = asked.error
        content: Any = None
        if reason is None:
            try:
                content = check(asked.plan)
            except InvalidInput as exc:
                reason = f"the answer breaks the summary's bounds: {exc.message}"
            else:
                reason = answer_problem(content, messages)
        if reason is not None:
            return Refused(kind, reason, asked.model, SUMMARY_PROMPT_VERSION, answer)
        return Written(content, SummaryMethod.LLM, asked.model, SUMMARY_PROMPT_VERSION, answer)

    def rolling(
        self,
        previous: str | None,
        session_messages: Sequence[Mapping[str, Any]],
        new: Sequence[Mapping[str, Any]],
        being: str,
        user: str,
    ) -> Outcome:
        if self.llm() is None:
            text = extractive.rolling_summary(previous, session_messages, new, being)
            return Written(text, SummaryMethod.EXTRACTIVE)

        def check(plan: Any) -> str:
            assert isinstance(plan, RollingAnswer)
            text = plan.text.strip()
            if not text:
                raise InvalidInput("the rolling summary is empty", field="text")
            if len(text) > MAX_ROLLING_CHARS:
                raise InvalidInput(
                    f"a rolling summary has at most {MAX_ROLLING_CHARS} characters, got {len(text)}",
                    field="text",
                )
            return text

        prompt = rolling_prompt(previous, new, being, user)
        return self._ask(SummaryKind.ROLLING, ROLLING_TASK, prompt, RollingAnswer, new, check)

    def session(self, messages: Sequence[Mapping[str, Any]], being: str, user: str) -> Outcome:
        if self.llm() is None:
            return Written(extractive.session_summary(messages, being), SummaryMethod.EXTRACTIVE)

        def check(plan: Any) -> dict[str, Any]:
            assert isinstance(plan, SessionAnswer)
            return check_session_summary(plan.model_dump())

        prompt = session_prompt(messages, being, user)
        return self._ask(SummaryKind.SESSION, SESSION_TASK, prompt, SessionAnswer, messages, check)

    def spine(
        self,
        previous: Mapping[str, Sequence[str]] | None,
        summaries: Sequence[Mapping[str, Any]],
        messages: Sequence[Mapping[str, Any]],
        being: str,
        user: str,
    ) -> Outcome:
        if self.llm() is None:
            return Written(extractive.spine(previous, messages, being), SummaryMethod.EXTRACTIVE)

        def check(plan: Any) -> dict[str, list[str]]:
            assert isinstance(plan, SpineAnswer)
            return check_spine(plan.model_dump())

        prompt = spine_prompt(previous, summaries, messages, being, user)
        return self._ask(SummaryKind.SPINE, SPINE_TASK, prompt, SpineAnswer, messages, check)
