"""Asking the LLM for a plan: one retry on a malformed answer; failures become recorded reasons.

What is recorded of an answer is capped (`max_answer_bytes`, ADR 0026) whatever LLM answered: an
answer over the cap is never used as a plan, only its first bytes are kept, and the cut is marked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel

from engram.domain.text import recordable
from engram.services.llm_answers import capped, refuse_over_cap
from engram.services.patrol.prompts import PROMPT_VERSION, SYSTEM
from engram.services.ports import (
    LLM,
    LLMAnswerTooLarge,
    LLMBadResponse,
    LLMError,
    LLMMalformedAnswer,
    LLMTransientError,
    ModelClass,
)

log = structlog.get_logger("engram.patrol.llm")

T = TypeVar("T", bound=BaseModel)


@dataclass
class Asked:
    """The outcome of one question: a validated plan, or why there is none."""

    task: str
    model: str
    prompt_version: str
    raw: str
    plan: BaseModel | None
    error: str | None = None
    transient: bool = False
    attempts: int = 0
    bad_response: bool = False
    """The server's answer held no answer (`llm_bad_response`): record it, ask it nothing more this step."""
    problem: dict[str, Any] = field(default_factory=dict)
    """Details of `error` kept with the recorded rejection (code, status, content type, sizes)."""

    def decision(self, rejected: list[dict[str, Any]]) -> dict[str, Any]:
        """The decision's record. What the model said is kept as it said it, but for the characters no
        store can keep (a NUL), written as `\\u0000`: the log would refuse the whole event (ADR 0029)."""
        extra = [{"item": None, "reason": self.error, **self.problem}] if self.error else []
        record: dict[str, Any] = recordable(
            {
                "model": self.model,
                "prompt_version": self.prompt_version,
                "raw_answer": self.raw,
                "parsed_plan": self.plan.model_dump(mode="json") if self.plan is not None else None,
                "rejected": extra + rejected,
            }
        )
        return record


def ask(
    llm: LLM,
    task: str,
    prompt: str,
    schema: type[T],
    model_class: ModelClass,
    *,
    max_answer_bytes: int,
    system: str = SYSTEM,
    prompt_version: str = PROMPT_VERSION,
) -> Asked:
    """Ask once, and once more on a malformed answer. `system` and `prompt_version` default to
    patrol's; another asker (a note merge) passes its own, so its records carry its version."""
    model = llm.model_for(model_class)
    raw = ""
    error = ""
    problem: dict[str, Any] = {}
    for attempt in (1, 2):
        try:
            answer = llm.complete(
                task=task, system=system, prompt=prompt, schema=schema, model_class=model_class
            )
            # The adapters refuse an answer over their cap before parsing it; this holds any LLM to it.
            refuse_over_cap(answer.raw, max_answer_bytes, what="the answer")
        except LLMMalformedAnswer as exc:
            raw, error = capped(exc.raw, max_answer_bytes), f"malformed answer: {exc}"
            problem = _too_large(exc, max_answer_bytes)
            log.warning("llm answer malformed", task=task, attempt=attempt)
            continue
        except LLMBadResponse as exc:
            log.warning("llm bad response", task=task, kind=exc.kind, status=exc.status)
            return Asked(
                task,
                model,
                prompt_version,
                exc.first_bytes,
                None,
                f"{LLMBadResponse.code}: {exc}",
                attempts=attempt,
                bad_response=True,
                problem={
                    "code": LLMBadResponse.code,
                    "kind": exc.kind,
                    "status": exc.status,
                    "content_type": exc.content_type,
                },
            )
        except LLMTransientError as exc:
            return Asked(task, model, prompt_version, raw, None, f"LLM unavailable: {exc}", True, attempt)
        except LLMError as exc:
            return Asked(task, model, prompt_version, raw, None, f"LLM error: {exc}", True, attempt)
        return Asked(task, answer.model, prompt_version, answer.raw, answer.parsed, None, False, attempt)
    return Asked(
        task, model, prompt_version, raw, None, f"{error} (after one retry)", False, 2, problem=problem
    )


def _too_large(exc: LLMMalformedAnswer, max_answer_bytes: int) -> dict[str, Any]:
    if not isinstance(exc, LLMAnswerTooLarge):
        return {}
    return {"code": LLMAnswerTooLarge.code, "answer_bytes": exc.size, "cap_bytes": max_answer_bytes}
