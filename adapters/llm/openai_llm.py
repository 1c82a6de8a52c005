"""OpenAI Chat Completions (or any compatible server), structured output by a strict `json_schema`."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import TypeVar

import httpx2
import openai
import structlog
from pydantic import BaseModel, Field, ValidationError, model_validator

from engram.adapters.llm.responses import Label, read_envelope
from engram.adapters.llm.retry import (
    CallRecord,
    Failure,
    Redactor,
    RetryPolicy,
    call_with_retries,
    check_task_name,
    failure_for_status,
    logged_call,
    validation_summary,
)
from engram.adapters.llm.strict_schema import to_strict_json_schema
from engram.services.llm_answers import DEFAULT_MAX_ANSWER_KIB, capped, refuse_over_cap
from engram.services.ports import LLMAnswer, LLMMalformedAnswer, ModelClass

log = structlog.get_logger(__name__)

T = TypeVar("T", bound=BaseModel)

PROVIDER = "openai"
DEFAULT_REASONING_MODEL = "gpt-5.4"
DEFAULT_FAST_MODEL = "gpt-5.4-mini"
DEFAULT_MAX_TOKENS = 4096


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: Label | None = None

    @model_validator(mode="after")
    def _says_something(self) -> _Choice:
        if self.message.content is None and not self.message.refusal:
            raise ValueError("the message has neither content nor a refusal")
        return self


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Completion(BaseModel):
    """What we read of a chat completion; compatible servers often leave out the rest."""

    choices: list[_Choice] = Field(min_length=1)
    model: Label | None = None
    usage: _Usage | None = None


def _classify(exc: Exception) -> Failure | None:
    if isinstance(exc, openai.APIStatusError):
        return failure_for_status(exc.status_code, exc.response.headers, exc.body)
    # APITimeoutError is a subclass of APIConnectionError, hence the order.
    if isinstance(exc, openai.APITimeoutError):
        return Failure(retryable=True, reason="request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Failure(retryable=True, reason="connection error")
    if isinstance(exc, openai.OpenAIError):
        return Failure(retryable=False, reason=f"{type(exc).__name__}: {exc}")
    return None


class OpenAILLM:
    """`LLM` port on the official `openai` SDK; `base_url` points it at any compatible server."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        reasoning_model: str | None = None,
        fast_model: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_KIB * 1024,
        http_client: httpx2.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not api_key:
            raise ValueError("OpenAILLM needs an API key; use NoLLM when none is configured")
        self._models: dict[ModelClass, str] = {
            "reasoning": reasoning_model or DEFAULT_REASONING_MODEL,
            "fast": fast_model or DEFAULT_FAST_MODEL,
        }
        self._max_tokens = max_tokens
        self._max_answer_bytes = max_answer_bytes
        self._policy = RetryPolicy(max_retries=max_retries, sleep=sleep, jitter=jitter)
        self._redact = Redactor(api_key)
        # The SDK's own retries are off: `call_with_retries` is the single retry loop.
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            max_retries=0,
            timeout=timeout_s,
        )

    @property
    def available(self) -> bool:
        return True

    def model_for(self, model_class: ModelClass) -> str:
        return self._models[model_class]

    def describe(self) -> str:
        return f"{PROVIDER}:{self._models['reasoning']}"

    def __repr__(self) -> str:
        return f"OpenAILLM({self.describe()})"

    def complete(
        self,
        *,
        task: str,
        system: str,
        prompt: str,
        schema: type[T],
        model_class: ModelClass,
    ) -> LLMAnswer:
        check_task_name(task)
        model = self.model_for(model_class)
        strict_schema = to_strict_json_schema(schema.model_json_schema())

        def call() -> _Completion:
            response = self._client.chat.completions.with_raw_response.create(
                model=model,
                max_completion_tokens=self._max_tokens,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": task, "schema": strict_schema, "strict": True},
                },
            )
            return read_envelope(response.http_response, _Completion, provider=PROVIDER, redact=self._redact)

        with logged_call(log, provider=PROVIDER, task=task, model=model, model_class=model_class) as record:
            completion = call_with_retries(
                call,
                provider=PROVIDER,
                classify=_classify,
                policy=self._policy,
                redact=self._redact,
                record=record,
            )
            _record_usage(record, completion)
            return _parse(
                completion,
                task=task,
                schema=schema,
                requested_model=model,
                max_answer_bytes=self._max_answer_bytes,
            )


def _parse(
    completion: _Completion, *, task: str, schema: type[T], requested_model: str, max_answer_bytes: int
) -> LLMAnswer:
    choice = completion.choices[0]
    message = choice.message
    if message.refusal:
        raise LLMMalformedAnswer(
            f"{PROVIDER} refused the {task} task", raw=capped(message.refusal, max_answer_bytes)
        )
    raw = message.content or ""
    refuse_over_cap(raw, max_answer_bytes, what=f"{PROVIDER} {task} answer")
    truncated = " (answer cut off at the token limit)" if choice.finish_reason == "length" else ""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise LLMMalformedAnswer(
            f"{PROVIDER} {task} answer is not JSON{truncated}: {exc.args[0] if exc.args else exc}",
            raw=raw,
        ) from None
    try:
        parsed = schema.model_validate(data)
    except ValidationError as exc:
        raise LLMMalformedAnswer(
            f"{PROVIDER} {task} answer does not match {schema.__name__}{truncated}: "
            f"{validation_summary(exc)}",
            raw=raw,
        ) from None
    return LLMAnswer(model=completion.model or requested_model, raw=raw, parsed=parsed)


def _record_usage(record: CallRecord, completion: _Completion) -> None:
    # Compatible servers do not all report usage.
    usage = completion.usage
    if usage is None:
        return
    for ours, value in (("input_tokens", usage.prompt_tokens), ("output_tokens", usage.completion_tokens)):
        if value is not None:
            record.usage[ours] = value
