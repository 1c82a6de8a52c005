"""The LLM when none is configured (no key, or `ENGRAM_LLM=none`): the patrol skips its LLM steps."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from engram.services.ports import LLMAnswer, LLMUnavailable, ModelClass

T = TypeVar("T", bound=BaseModel)


class NoLLM:
    @property
    def available(self) -> bool:
        return False

    def model_for(self, model_class: ModelClass) -> str:
        return "none"

    def describe(self) -> str:
        return "none"

    def __repr__(self) -> str:
        return "NoLLM()"

    def complete(
        self,
        *,
        task: str,
        system: str,
        prompt: str,
        schema: type[T],
        model_class: ModelClass,
    ) -> LLMAnswer:
        raise LLMUnavailable(
            "no LLM is configured (BYOK key not set): set ENGRAM_ANTHROPIC_API_KEY or ENGRAM_OPENAI_API_KEY, "
            "and ENGRAM_LLM to auto or the provider"
        )
