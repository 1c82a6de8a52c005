"""Anthropic Messages API, structured output by a forced tool call.

Forcing the model to call one tool whose `input_schema` is the answer schema
is the documented way to get JSON of a given shape from Claude: the `input`
of the `tool_use` block is the answer.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anthropic
import httpx2
import structlog
from pydantic import BaseModel, Field, ValidationError

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
from engram.services.llm_answers import DEFAULT_MAX_ANSWER_KIB, capped, refuse_over_cap
from engram.services.ports import LLMAnswer, LLMMalformedAnswer, ModelClass

log = structlog.get_logger(__name__)

T = TypeVar("T", bound=BaseModel)

PROVIDER = "anthropic"
DEFAULT_REASONING_MODEL = "claude-sonnet-4-6"
DEFAULT_FAST_MODEL = "claude-haiku-4-5"
DEFAULT_MAX_TOKENS = 4096


class _Block(BaseModel):
    type: str
    name: str | None = None
    input: Any = None
    text: str | None = None


class _Usage(BaseModel):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _Message(BaseModel):
    """What we read of a Messages API answer; proxies often leave out the rest."""

    content: list[_Block] = Field(min_length=1)
    model: Label | None = None
    stop_reason: Label | None = None
    usage: _Usage | None = None


def _classify(exc: Exception) -> Failure | None:
    if isinstance(exc, anthropic.APIStatusError):
        return failure_for_status(exc.status_code, exc.response.headers, exc.body)
    # APITimeoutError is a subclass of APIConnectionError, hence the order.
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(retryable=True, reason="request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure(retryable=True, reason="connection error")
    if isinstance(exc, anthropic.AnthropicError):
        return Failure(retryable=False, reason=f"{type(exc).__name__}: {exc}")
    return None


class AnthropicLLM:
    """`LLM` port on the official `anthropic` SDK."""

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
            raise ValueError("AnthropicLLM needs an API key; use NoLLM when none is configured")
        self._models: dict[ModelClass, str] = {
            "reasoning": reasoning_model or DEFAULT_REASONING_MODEL,
            "fast": fast_model or DEFAULT_FAST_MODEL,
        }
        self._max_tokens = max_tokens
        self._max_answer_bytes = max_answer_bytes
        self._policy = RetryPolicy(max_retries=max_retries, sleep=sleep, jitter=jitter)
        self._redact = Redactor(api_key)
        # The SDK's own retries are off: `call_with_retries` is the single retry loop.
        self._client = anthropic.Anthropic(
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
        return f"AnthropicLLM({self.describe()})"

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
        input_schema = schema.model_json_schema()
        description = (schema.__doc__ or "").strip() or f"Record the answer of the {task} task."

        def call() -> _Message:
            response = self._client.messages.with_raw_response.create(
                model=model,
                max_tokens=self._max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
                tools=[{"name": task, "description": description, "input_schema": input_schema}],
                tool_choice={"type": "tool", "name": task},
            )
            return read_envelope(response.http_response, _Message, provider=PROVIDER, redact=self._redact)

        with logged_call(log, provider=PROVIDER, task=task, model=model, model_class=model_class) as record:
            message = call_with_retries(
                call,
                provider=PROVIDER,
                classify=_classify,
                policy=self._policy,
                redact=self._redact,
                record=record,
            )
            _record_usage(record, message)
            return self._parse(message, task=task, schema=schema, requested_model=model)

    def _parse(self, message: _Message, *, task: str, schema: type[T], requested_model: str) -> LLMAnswer:
        tool_use = next(
            (block for block in message.content if block.type == "tool_use" and block.name == task), None
        )
        if tool_use is None:
            text = "".join(block.text or "" for block in message.content if block.type == "text")
            raise LLMMalformedAnswer(
                f"{PROVIDER} answered without calling the {task} tool (stop_reason={message.stop_reason})",
                raw=capped(text, self._max_answer_bytes),
            )
        raw = json.dumps(tool_use.input, sort_keys=True, ensure_ascii=False)
        refuse_over_cap(raw, self._max_answer_bytes, what=f"{PROVIDER} {task} answer")
        try:
            parsed = schema.model_validate(tool_use.input)
        except ValidationError as exc:
            truncated = " (answer cut off at max_tokens)" if message.stop_reason == "max_tokens" else ""
            raise LLMMalformedAnswer(
                f"{PROVIDER} {task} answer does not match {schema.__name__}{truncated}: "
                f"{validation_summary(exc)}",
                raw=raw,
            ) from None
        return LLMAnswer(model=message.model or requested_model, raw=raw, parsed=parsed)


def _record_usage(record: CallRecord, message: _Message) -> None:
    # Proxies speaking the Messages API do not all report usage.
    if message.usage is None:
        return
    for name, value in (
        ("input_tokens", message.usage.input_tokens),
        ("output_tokens", message.usage.output_tokens),
    ):
        if value is not None:
            record.usage[name] = value
