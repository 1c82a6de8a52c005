"""The LLM when no key is configured: the pipeline skips its LLM steps instead of failing."""

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
        raise LLMUnavailable("BYOK key not set")
