"""Ports: what the application needs from the outside world.

Adapters in `adapters/` implement these; the composition root
(`services.bootstrap`) picks them from configuration. Nothing here performs
I/O itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol, TypeVar, runtime_checkable
from uuid import UUID

from pydantic import BaseModel

from engram.domain.embedding import Embedding


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...


class IdFactory(Protocol):
    def new_id(self) -> UUID: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one model.

    `model_id` names the model and dimension (e.g. `minilm-l6-v2-int8`), so
    that vectors of different embedders are never mixed.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """One vector per text, in order. Implementations batch internally."""
        ...


class EmbedderError(Exception):
    """The embedder could not produce vectors (network, quota, bad model)."""


ModelClass = Literal["fast", "reasoning"]

T = TypeVar("T", bound=BaseModel)


class LLMAnswer(BaseModel):
    """What a model answered: the raw text is kept for the audit trail, `parsed` is validated."""

    model: str
    raw: str
    parsed: BaseModel

    model_config = {"arbitrary_types_allowed": True}


class LLMError(Exception):
    """Base of LLM failures. `retryable` marks rate limits, 5xx and timeouts."""

    retryable = False


class LLMUnavailable(LLMError):
    """No key configured: the LLM steps are skipped."""


class LLMTransientError(LLMError):
    retryable = True


class LLMMalformedAnswer(LLMError):
    """The model answered, but not in the requested schema. `raw` keeps what it said."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class LLMAnswerTooLarge(LLMMalformedAnswer):
    """The answer is longer than the configured cap: never parsed; `raw` holds its first bytes, cut marked."""

    code = "llm_answer_too_large"

    def __init__(self, message: str, raw: str, size: int) -> None:
        super().__init__(message, raw)
        self.size = size


BadResponseKind = Literal["empty", "not_json", "wrong_shape"]


class LLMBadResponse(LLMError):
    """The server answered, but with no answer in it: an HTML page, an empty or non-JSON body, or JSON
    of the wrong shape. Raised once the adapter's retries for that kind are spent (ADR 0026)."""

    code = "llm_bad_response"

    def __init__(
        self, message: str, *, kind: BadResponseKind, status: int, content_type: str, first_bytes: str
    ) -> None:
        super().__init__(message)
        self.kind: BadResponseKind = kind
        self.status = status
        self.content_type = content_type
        self.first_bytes = first_bytes


class LLM(Protocol):
    """Structured-output completion. `task` names the schema (e.g. `consolidate_cluster`)."""

    @property
    def available(self) -> bool: ...

    def describe(self) -> str:
        """Provider and model, e.g. `anthropic:claude-sonnet-4-6`; never a secret."""
        ...

    def model_for(self, model_class: ModelClass) -> str: ...

    def complete(
        self,
        *,
        task: str,
        system: str,
        prompt: str,
        schema: type[T],
        model_class: ModelClass,
    ) -> LLMAnswer:
        """Ask for an answer that validates against `schema`.

        Raises `LLMMalformedAnswer` when the answer does not validate
        (`LLMAnswerTooLarge` when it is over the adapter's cap, unparsed),
        `LLMBadResponse` when the server's body holds no answer at all,
        `LLMTransientError` for rate limits, 5xx and timeouts (after the
        adapter's own bounded retries), `LLMUnavailable` without a key.
        """
        ...
