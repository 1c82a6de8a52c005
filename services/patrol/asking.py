"""Asking the LLM for a plan: one retry on a malformed answer; failures become recorded reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel

from engram.services.patrol.prompts import PROMPT_VERSION, SYSTEM
from engram.services.ports import LLM, LLMError, LLMMalformedAnswer, LLMTransientError, ModelClass

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

    def decision(self, rejected: list[dict[str, Any]]) -> dict[str, Any]:
        extra = [{"item": None, "reason": self.error}] if self.error else []
        return {
            "model": self.model,
            "prompt_version": self.prompt_version,
            "raw_answer": self.raw,
            "parsed_plan": self.plan.model_dump(mode="json") if self.plan is not None else None,
            "rejected": extra + rejected,
        }


def ask(llm: LLM, task: str, prompt: str, schema: type[T], model_class: ModelClass) -> Asked:
    model = llm.model_for(model_class)
    raw = ""
    error = ""
    for attempt in (1, 2):
        try:
            answer = llm.complete(
                task=task, system=SYSTEM, prompt=prompt, schema=schema, model_class=model_class
            )
        except LLMMalformedAnswer as exc:
            raw, error = exc.raw, f"malformed answer: {exc}"
            log.warning("llm answer malformed", task=task, attempt=attempt)
            continue
        except LLMTransientError as exc:
            return Asked(task, model, PROMPT_VERSION, raw, None, f"LLM unavailable: {exc}", True, attempt)
        except LLMError as exc:
            return Asked(task, model, PROMPT_VERSION, raw, None, f"LLM error: {exc}", True, attempt)
        return Asked(task, answer.model, PROMPT_VERSION, answer.raw, answer.parsed, None, False, attempt)
    return Asked(task, model, PROMPT_VERSION, raw, None, f"{error} (after one retry)", False, 2)
