"""LLM adapters through the real `anthropic` / `openai` SDK clients.

Only the network is replaced: each SDK gets an `httpx2.Client` over a
`MockTransport` (both SDKs moved from `httpx` to `httpx2` and refuse `httpx`
objects), so request building, response decoding and the SDKs' exception
mapping all run for real.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Literal

import httpx2
import pytest
from pydantic import BaseModel, Field
from structlog.testing import capture_logs

from engram.adapters.llm import (
    AnthropicLLM,
    LLMConfigError,
    NoLLM,
    OpenAILLM,
    build_llm,
    to_strict_json_schema,
)
from engram.adapters.llm.retry import Redactor, RetryPolicy
from engram.services.config import Settings
from engram.services.ports import (
    LLM,
    LLMError,
    LLMMalformedAnswer,
    LLMTransientError,
    LLMUnavailable,
)

# The anthropic SDK warns on every call with a model that has an announced end of life.

ANTHROPIC_KEY = "sk-ant-api03-FAKEKEY-never-print-me-0123456789abcdef"
OPENAI_KEY = "sk-proj-FAKEKEY-never-print-me-fedcba9876543210"
TASK = "consolidate_cluster"
SYSTEM = "You consolidate memory notes."
PROMPT = "PROMPT-TEXT-THAT-MUST-NOT-BE-LOGGED: notes a, b, c"


class Plan(BaseModel):
    groups: list[list[str]]
    reason: str


PLAN_INPUT = {"groups": [["n1", "n2"], ["n3"]], "reason": "n1 and n2 describe the same trip"}


# --- fake server ------------------------------------------------------------------------------

Reply = httpx2.Response | Callable[[httpx2.Request], httpx2.Response]


class FakeServer:
    """Answers with a script of replies; the last one repeats. Records every request."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(request) if callable(reply) else reply

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))

    def body(self, index: int = 0) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.requests[index].content)
        return data


def read_timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out", request=request)


def connect_error(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("connection refused", request=request)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture(autouse=True)
def _no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real keys in the environment must not change what the tests select or send.
    for name in (
        "ANTHROPIC_API_KEY",
        "ENGRAM_ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ENGRAM_ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "ENGRAM_OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ENGRAM_OPENAI_BASE_URL",
        "ENGRAM_LLM",
        "ENGRAM_LLM_REASONING_MODEL",
        "ENGRAM_LLM_FAST_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs() as captured:
        yield captured


# --- realistic bodies (shapes copied from the vendors' API references) -----------------------


def anthropic_message(content: list[dict[str, Any]], *, stop_reason: str = "tool_use") -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
        json={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6-20260101",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 412,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 88,
                "service_tier": "standard",
            },
        },
    )


def anthropic_tool_use(tool_input: dict[str, Any], *, name: str = TASK) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": name, "input": tool_input}


def anthropic_error(status: int, error_type: str, message: str, **headers: str) -> httpx2.Response:
    return httpx2.Response(
        status,
        headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **headers},
        json={
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        },
    )


def openai_completion(
    content: str | None, *, finish_reason: str = "stop", refusal: str | None = None
) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"x-request-id": "req_9f3c2a1b7e6d4c5b8a9f0e1d2c3b4a5f"},
        json={
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-5.4-2026-03-05",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "refusal": refusal,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": 219,
                "completion_tokens": 41,
                "total_tokens": 260,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_b7faba9ef5",
        },
    )


def openai_error(
    status: int, message: str, error_type: str, code: str | None, **headers: str
) -> httpx2.Response:
    return httpx2.Response(
        status,
        headers=headers,
        json={"error": {"message": message, "type": error_type, "param": None, "code": code}},
    )


OPENAI_RATE_LIMIT = openai_error(
    429,
    "Rate limit reached for gpt-4.1 in organization org-abc on tokens per min (TPM): "
    "Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s.",
    "tokens",
    "rate_limit_exceeded",
)


def make_anthropic(server: FakeServer, sleeps: Sleeps, **kwargs: Any) -> AnthropicLLM:
    kwargs.setdefault("max_retries", 3)
    return AnthropicLLM(
        api_key=ANTHROPIC_KEY, http_client=server.client(), sleep=sleeps, jitter=lambda: 0.0, **kwargs
    )


def make_openai(server: FakeServer, sleeps: Sleeps, **kwargs: Any) -> OpenAILLM:
    kwargs.setdefault("max_retries", 3)
    kwargs.setdefault("base_url", "https://llm-proxy.example.com/v1")
    return OpenAILLM(
        api_key=OPENAI_KEY, http_client=server.client(), sleep=sleeps, jitter=lambda: 0.0, **kwargs
    )


def ask(llm: LLM, model_class: Literal["fast", "reasoning"] = "reasoning") -> Plan:
    answer = llm.complete(task=TASK, system=SYSTEM, prompt=PROMPT, schema=Plan, model_class=model_class)
    assert isinstance(answer.parsed, Plan)
    return answer.parsed


def assert_no_secret(*texts: object) -> None:
    for text in texts:
        rendered = str(text)
        assert ANTHROPIC_KEY not in rendered
        assert OPENAI_KEY not in rendered
        assert "FAKEKEY" not in rendered


# --- Anthropic: request and response ------------------------------------------------------------


def test_anthropic_forces_one_tool_named_after_the_task(sleeps: Sleeps) -> None:
    server = FakeServer(anthropic_message([anthropic_tool_use(PLAN_INPUT)]))
    llm = make_anthropic(server, sleeps)

    answer = llm.complete(task=TASK, system=SYSTEM, prompt=PROMPT, schema=Plan, model_class="reasoning")

    request = server.requests[0]
    assert request.method == "POST"
    assert request.url.host == "api.anthropic.com"
    assert request.url.path == "/v1/messages"
    # anthropic<1 sends `x-api-key`; the 2.x SDK installed here sends the key as a bearer token.
    assert (
        request.headers.get("x-api-key") == ANTHROPIC_KEY
        or request.headers.get("authorization") == f"Bearer {ANTHROPIC_KEY}"
    )
    assert request.headers["anthropic-version"]
    body = server.body()
    assert body["model"] == "claude-sonnet-4-6"
    assert body["max_tokens"] == 4096
    assert body["system"] == SYSTEM
    assert body["messages"] == [{"role": "user", "content": PROMPT}]
    assert len(body["tools"]) == 1
    assert body["tools"][0]["name"] == TASK
    assert body["tools"][0]["input_schema"] == Plan.model_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": TASK}

    assert answer.parsed == Plan.model_validate(PLAN_INPUT)
    assert answer.model == "claude-sonnet-4-6-20260101"
    assert answer.raw == json.dumps(PLAN_INPUT, sort_keys=True)
    assert sleeps == []


def test_anthropic_fast_class_custom_models_and_base_url(sleeps: Sleeps) -> None:
    server = FakeServer(anthropic_message([anthropic_tool_use(PLAN_INPUT)]))
    llm = make_anthropic(
        server,
        sleeps,
        base_url="https://gateway.example.com/anthropic",
        reasoning_model="claude-sonnet-4-6",
        fast_model="claude-haiku-4-5-20251001",
    )

    ask(llm, "fast")

    assert str(server.requests[0].url) == "https://gateway.example.com/anthropic/v1/messages"
    assert server.body()["model"] == "claude-haiku-4-5-20251001"
    assert llm.model_for("reasoning") == "claude-sonnet-4-6"
    assert llm.describe() == "anthropic:claude-sonnet-4-6"


def test_anthropic_ignores_text_around_the_tool_call(sleeps: Sleeps) -> None:
    server = FakeServer(
        anthropic_message([{"type": "text", "text": "Here is my grouping."}, anthropic_tool_use(PLAN_INPUT)])
    )
    assert ask(make_anthropic(server, sleeps)).reason == PLAN_INPUT["reason"]


def test_anthropic_defaults() -> None:
    llm = AnthropicLLM(api_key=ANTHROPIC_KEY)
    assert llm.available is True
    assert llm.model_for("reasoning") == "claude-sonnet-4-6"
    assert llm.model_for("fast") == "claude-haiku-4-5"
    assert llm.describe() == "anthropic:claude-sonnet-4-6"
    assert_no_secret(repr(llm), llm.describe())


# --- OpenAI: request and response -------------------------------------------------------------


def test_openai_sends_a_strict_json_schema_named_after_the_task(sleeps: Sleeps) -> None:
    server = FakeServer(openai_completion(json.dumps(PLAN_INPUT)))
    llm = make_openai(server, sleeps)

    answer = llm.complete(task=TASK, system=SYSTEM, prompt=PROMPT, schema=Plan, model_class="reasoning")

    request = server.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "https://llm-proxy.example.com/v1/chat/completions"
    assert request.url.path.endswith("/chat/completions")
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    body = server.body()
    assert body["model"] == "gpt-5.4"
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT},
    ]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == TASK
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == to_strict_json_schema(Plan.model_json_schema())
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert fmt["json_schema"]["schema"]["required"] == ["groups", "reason"]

    assert answer.parsed == Plan.model_validate(PLAN_INPUT)
    assert answer.model == "gpt-5.4-2026-03-05"
    assert answer.raw == json.dumps(PLAN_INPUT)


def test_openai_fast_class_and_defaults(sleeps: Sleeps) -> None:
    server = FakeServer(openai_completion(json.dumps(PLAN_INPUT)))
    llm = make_openai(server, sleeps)
    ask(llm, "fast")
    assert server.body()["model"] == "gpt-5.4-mini"
    assert llm.model_for("reasoning") == "gpt-5.4"
    assert llm.describe() == "openai:gpt-5.4"
    assert llm.available is True
    assert_no_secret(repr(llm))


# --- retries ------------------------------------------------------------------------------------


def test_anthropic_rate_limited_twice_then_succeeds(
    sleeps: Sleeps, logs: list[MutableMapping[str, Any]]
) -> None:
    limited = anthropic_error(
        429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"
    )
    server = FakeServer(limited, limited, anthropic_message([anthropic_tool_use(PLAN_INPUT)]))

    assert ask(make_anthropic(server, sleeps)).groups == PLAN_INPUT["groups"]

    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert sleeps[0] < sleeps[1]
    (line,) = logs
    assert line["attempts"] == 3
    assert line["outcome"] == "ok"


def test_openai_rate_limited_twice_then_succeeds(sleeps: Sleeps) -> None:
    server = FakeServer(OPENAI_RATE_LIMIT, OPENAI_RATE_LIMIT, openai_completion(json.dumps(PLAN_INPUT)))
    assert ask(make_openai(server, sleeps)).reason == PLAN_INPUT["reason"]
    assert len(server.requests) == 3
    assert sleeps == sorted(sleeps) and sleeps[0] < sleeps[1]


def test_backoff_grows_with_real_jitter() -> None:
    policy = RetryPolicy(max_retries=6)
    delays = [policy.delay(n) for n in range(1, 7)]
    assert delays == sorted(delays)
    assert all(a < b for a, b in itertools.pairwise(delays))
    assert 0.5 <= delays[0] <= 0.625


def test_backoff_honours_retry_after_but_stays_bounded(sleeps: Sleeps) -> None:
    server = FakeServer(
        anthropic_error(429, "rate_limit_error", "slow down", **{"retry-after": "7"}),
        anthropic_error(429, "rate_limit_error", "slow down", **{"retry-after": "3600"}),
        anthropic_message([anthropic_tool_use(PLAN_INPUT)]),
    )
    ask(make_anthropic(server, sleeps))
    assert sleeps == [7.0, RetryPolicy().max_delay_s]


def test_anthropic_rate_limited_always(sleeps: Sleeps, logs: list[MutableMapping[str, Any]]) -> None:
    server = FakeServer(
        anthropic_error(429, "rate_limit_error", "Number of requests has exceeded your limit")
    )
    llm = make_anthropic(server, sleeps, max_retries=2)

    with pytest.raises(LLMTransientError) as caught:
        ask(llm)

    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert caught.value.retryable is True
    message = str(caught.value)
    assert "429" in message
    assert "rate_limit_error" in message
    assert "3 attempts" in message
    (line,) = logs
    assert line["outcome"] == "transient"
    assert line["attempts"] == 3
    assert line["log_level"] == "warning"


def test_openai_rate_limited_always(sleeps: Sleeps) -> None:
    server = FakeServer(OPENAI_RATE_LIMIT)
    with pytest.raises(LLMTransientError, match="429"):
        ask(make_openai(server, sleeps, max_retries=1))
    assert len(server.requests) == 2


def test_zero_retries_means_one_attempt(sleeps: Sleeps) -> None:
    server = FakeServer(OPENAI_RATE_LIMIT)
    with pytest.raises(LLMTransientError):
        ask(make_openai(server, sleeps, max_retries=0))
    assert len(server.requests) == 1
    assert sleeps == []


def test_anthropic_500_is_retried_then_reported(sleeps: Sleeps) -> None:
    server = FakeServer(anthropic_error(500, "api_error", "Internal server error"))
    with pytest.raises(LLMTransientError, match=r"HTTP 500 Internal Server Error: api_error"):
        ask(make_anthropic(server, sleeps))
    assert len(server.requests) == 4


def test_openai_5xx_then_success(sleeps: Sleeps) -> None:
    server = FakeServer(
        openai_error(500, "The server had an error while processing your request.", "server_error", None),
        openai_error(503, "The engine is currently overloaded.", "server_error", None),
        openai_completion(json.dumps(PLAN_INPUT)),
    )
    ask(make_openai(server, sleeps))
    assert len(server.requests) == 3


def test_anthropic_529_overloaded_is_transient(sleeps: Sleeps) -> None:
    overloaded = anthropic_error(529, "overloaded_error", "Overloaded")
    server = FakeServer(overloaded, anthropic_message([anthropic_tool_use(PLAN_INPUT)]))
    ask(make_anthropic(server, sleeps))
    assert len(server.requests) == 2

    server = FakeServer(overloaded)
    with pytest.raises(LLMTransientError, match=r"529 Overloaded: overloaded_error"):
        ask(make_anthropic(server, sleeps, max_retries=1))


@pytest.mark.parametrize("make", [make_anthropic, make_openai])
def test_timeouts_are_retried_then_transient(make: Callable[..., LLM], sleeps: Sleeps) -> None:
    server = FakeServer(read_timeout)
    with pytest.raises(LLMTransientError, match="timed out") as caught:
        ask(make(server, sleeps, max_retries=2))
    assert len(server.requests) == 3
    assert "3 attempts" in str(caught.value)


@pytest.mark.parametrize(
    ("make", "ok"),
    [
        (make_anthropic, anthropic_message([anthropic_tool_use(PLAN_INPUT)])),
        (make_openai, openai_completion(json.dumps(PLAN_INPUT))),
    ],
)
def test_connection_errors_are_retried(make: Callable[..., LLM], ok: httpx2.Response, sleeps: Sleeps) -> None:
    server = FakeServer(connect_error, read_timeout, ok)
    ask(make(server, sleeps))
    assert len(server.requests) == 3
    assert len(sleeps) == 2


# --- non-retryable errors -----------------------------------------------------------------------


def test_anthropic_401_is_not_retried(sleeps: Sleeps, logs: list[MutableMapping[str, Any]]) -> None:
    server = FakeServer(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(LLMError) as caught:
        ask(make_anthropic(server, sleeps))
    assert not isinstance(caught.value, LLMTransientError)
    assert caught.value.retryable is False
    assert len(server.requests) == 1
    assert sleeps == []
    message = str(caught.value)
    assert "401" in message and "authentication_error" in message and "check the API key" in message
    assert logs[0]["outcome"] == "error"


@pytest.mark.parametrize(
    ("status", "error_type", "hint"),
    [
        (400, "invalid_request_error", None),
        (403, "permission_error", "lacks permission"),
        (404, "not_found_error", "model name"),
    ],
)
def test_anthropic_client_errors_are_not_retried(
    status: int, error_type: str, hint: str | None, sleeps: Sleeps
) -> None:
    server = FakeServer(anthropic_error(status, error_type, "model: claude-nope"))
    with pytest.raises(LLMError) as caught:
        ask(make_anthropic(server, sleeps))
    assert type(caught.value) is LLMError
    assert str(status) in str(caught.value) and error_type in str(caught.value)
    if hint:
        assert hint in str(caught.value)
    assert len(server.requests) == 1


def test_openai_insufficient_quota_429_is_not_retried(sleeps: Sleeps) -> None:
    server = FakeServer(
        openai_error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )
    )
    with pytest.raises(LLMError, match="insufficient_quota") as caught:
        ask(make_openai(server, sleeps))
    assert not isinstance(caught.value, LLMTransientError)
    assert len(server.requests) == 1


def test_openai_400_names_the_problem(sleeps: Sleeps) -> None:
    server = FakeServer(
        openai_error(
            400,
            "Invalid schema for response_format 'consolidate_cluster': In context=(), 'additionalProperties' "
            "is required to be supplied and to be false.",
            "invalid_request_error",
            "invalid_json_schema",
        )
    )
    with pytest.raises(LLMError, match=r"HTTP 400 Bad Request: invalid_json_schema: Invalid schema"):
        ask(make_openai(server, sleeps))


# --- secrets ------------------------------------------------------------------------------------


def test_keys_never_reach_messages_or_logs(
    sleeps: Sleeps, logs: list[MutableMapping[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    failures: list[BaseException] = []
    # Servers that quote the key back, in full and masked, as OpenAI's 401 does.
    openai_401 = openai_error(
        401,
        f"Incorrect API key provided: {OPENAI_KEY}. Also sk-proj-********************3210. "
        "You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    )
    anthropic_401 = anthropic_error(401, "authentication_error", f"invalid x-api-key {ANTHROPIC_KEY}")
    anthropic_429 = anthropic_error(429, "rate_limit_error", f"limit for key {ANTHROPIC_KEY}")
    cases: list[tuple[Callable[..., LLM], Reply]] = [
        (make_openai, openai_401),
        (make_anthropic, anthropic_401),
        (make_anthropic, anthropic_429),
        (make_openai, read_timeout),
        (make_openai, openai_completion("not json " + OPENAI_KEY)),
    ]
    for make, reply in cases:
        with pytest.raises(LLMError) as caught:
            ask(make(FakeServer(reply), sleeps, max_retries=1))
        failures.append(caught.value)
    ask(make_anthropic(FakeServer(anthropic_message([anthropic_tool_use(PLAN_INPUT)])), sleeps))

    for exc in failures:
        assert_no_secret(str(exc), repr(exc), exc.args)
        assert "sk-proj-****" not in str(exc)
        assert exc.__cause__ is None
        assert exc.__suppress_context__ is True
    assert len(logs) == len(cases) + 1
    assert_no_secret(logs)
    assert_no_secret(caplog.text)
    for line in logs:
        assert "PROMPT-TEXT-THAT-MUST-NOT-BE-LOGGED" not in str(line)


def test_redactor_hides_key_shapes() -> None:
    redact = Redactor("my-secret-value")
    assert redact("a my-secret-value b") == "a [redacted] b"
    assert redact("key sk-ant-api03-abcdefgh and sk-proj-****1234") == "key [redacted] and [redacted]"
    assert "my-secret" not in repr(redact)


def test_log_line_carries_task_model_duration_attempts(
    sleeps: Sleeps, logs: list[MutableMapping[str, Any]]
) -> None:
    ask(make_openai(FakeServer(openai_completion(json.dumps(PLAN_INPUT))), sleeps))
    (line,) = logs
    assert line["event"] == "llm.complete"
    assert line["log_level"] == "info"
    assert line["task"] == TASK
    assert line["model"] == "gpt-5.4"
    assert line["provider"] == "openai"
    assert line["attempts"] == 1
    assert isinstance(line["duration_ms"], float)
    assert line["input_tokens"] == 219
    assert line["output_tokens"] == 41
    assert PROMPT not in str(line) and SYSTEM not in str(line)


# --- malformed answers (never retried inside the adapter) ----------------------------------------


def test_anthropic_tool_input_missing_a_field(sleeps: Sleeps, logs: list[MutableMapping[str, Any]]) -> None:
    tool_input = {"groups": [["n1"]]}
    server = FakeServer(anthropic_message([anthropic_tool_use(tool_input)]))
    with pytest.raises(LLMMalformedAnswer) as caught:
        ask(make_anthropic(server, sleeps))
    assert caught.value.raw == json.dumps(tool_input, sort_keys=True)
    assert "reason" in str(caught.value) and "Plan" in str(caught.value)
    assert caught.value.retryable is False
    assert len(server.requests) == 1
    assert logs[0]["outcome"] == "malformed"


def test_anthropic_answer_without_tool_call_keeps_the_text(sleeps: Sleeps) -> None:
    server = FakeServer(
        anthropic_message(
            [{"type": "text", "text": "I can't "}, {"type": "text", "text": "group these."}],
            stop_reason="end_turn",
        )
    )
    with pytest.raises(LLMMalformedAnswer, match="without calling the consolidate_cluster tool") as caught:
        ask(make_anthropic(server, sleeps))
    assert caught.value.raw == "I can't group these."


def test_anthropic_tool_call_for_another_tool_is_malformed(sleeps: Sleeps) -> None:
    server = FakeServer(anthropic_message([anthropic_tool_use(PLAN_INPUT, name="something_else")]))
    with pytest.raises(LLMMalformedAnswer):
        ask(make_anthropic(server, sleeps))


def test_anthropic_truncated_answer_says_so(sleeps: Sleeps) -> None:
    server = FakeServer(
        anthropic_message([anthropic_tool_use({"groups": [["n1"]]})], stop_reason="max_tokens")
    )
    with pytest.raises(LLMMalformedAnswer, match="max_tokens"):
        ask(make_anthropic(server, sleeps))


def test_openai_content_not_json(sleeps: Sleeps) -> None:
    content = "Sure! Here are the groups: n1, n2"
    server = FakeServer(openai_completion(content))
    with pytest.raises(LLMMalformedAnswer, match="not JSON") as caught:
        ask(make_openai(server, sleeps))
    assert caught.value.raw == content
    assert len(server.requests) == 1


def test_openai_json_of_the_wrong_shape(sleeps: Sleeps) -> None:
    content = json.dumps({"groups": "n1,n2", "why": "same"})
    server = FakeServer(openai_completion(content))
    with pytest.raises(LLMMalformedAnswer, match="does not match Plan") as caught:
        ask(make_openai(server, sleeps))
    assert caught.value.raw == content
    assert "groups" in str(caught.value) and "reason" in str(caught.value)


def test_openai_truncated_content(sleeps: Sleeps) -> None:
    content = '{"groups": [["n1", "n2"]], "rea'
    server = FakeServer(openai_completion(content, finish_reason="length"))
    with pytest.raises(LLMMalformedAnswer, match="cut off") as caught:
        ask(make_openai(server, sleeps))
    assert caught.value.raw == content


def test_openai_refusal(sleeps: Sleeps) -> None:
    server = FakeServer(openai_completion(None, refusal="I'm sorry, I can't help with that."))
    with pytest.raises(LLMMalformedAnswer, match="refused") as caught:
        ask(make_openai(server, sleeps))
    assert caught.value.raw == "I'm sorry, I can't help with that."


@pytest.mark.parametrize("make", [make_anthropic, make_openai])
def test_bad_task_name_fails_before_any_request(make: Callable[..., LLM], sleeps: Sleeps) -> None:
    server = FakeServer(httpx2.Response(500))
    with pytest.raises(ValueError, match="task name"):
        make(server, sleeps).complete(
            task="consolidate cluster!", system=SYSTEM, prompt=PROMPT, schema=Plan, model_class="fast"
        )
    assert server.requests == []


# --- NoLLM --------------------------------------------------------------------------------------


def test_no_llm_is_unavailable() -> None:
    llm = NoLLM()
    assert llm.available is False
    assert llm.describe() == "none"
    with pytest.raises(LLMUnavailable, match="BYOK key not set"):
        ask(llm)


# --- factory ------------------------------------------------------------------------------------


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "ANTHROPIC_API_KEY": None,
        "OPENAI_API_KEY": None,
        "ANTHROPIC_BASE_URL": None,
        "OPENAI_BASE_URL": None,
    }
    values.update(overrides)
    return Settings(**values)


def test_auto_prefers_anthropic_then_openai_then_none() -> None:
    both = settings(ANTHROPIC_API_KEY=ANTHROPIC_KEY, OPENAI_API_KEY=OPENAI_KEY)
    assert isinstance(build_llm(both), AnthropicLLM)
    assert isinstance(build_llm(settings(OPENAI_API_KEY=OPENAI_KEY)), OpenAILLM)
    assert isinstance(build_llm(settings()), NoLLM)
    # An empty variable (`ANTHROPIC_API_KEY=`) counts as unset.
    assert isinstance(build_llm(settings(ANTHROPIC_API_KEY="", OPENAI_API_KEY=OPENAI_KEY)), OpenAILLM)


def test_explicit_provider_wins_over_auto_order() -> None:
    both = settings(ANTHROPIC_API_KEY=ANTHROPIC_KEY, OPENAI_API_KEY=OPENAI_KEY, llm="openai")
    assert isinstance(build_llm(both), OpenAILLM)
    assert isinstance(build_llm(both, provider_override="anthropic"), AnthropicLLM)
    assert isinstance(build_llm(both, provider_override="none"), NoLLM)
    assert isinstance(build_llm(settings(ANTHROPIC_API_KEY=ANTHROPIC_KEY, llm="none")), NoLLM)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_explicit_provider_without_key_is_a_config_error(provider: str) -> None:
    with pytest.raises(LLMConfigError, match=r"no .* key") as caught:
        build_llm(settings(llm=provider))
    assert isinstance(caught.value, ValueError)


def test_settings_models_timeout_and_retries_reach_the_adapter(sleeps: Sleeps) -> None:
    server = FakeServer(read_timeout)
    config = settings(
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL="https://compat.example.org/openai/v1",
        llm_reasoning_model="qwen3-32b",
        llm_fast_model="qwen3-8b",
        llm_max_retries=1,
        llm_timeout_s=5.0,
    )
    llm = build_llm(config, http_client=server.client())
    assert isinstance(llm, OpenAILLM)
    assert llm.describe() == "openai:qwen3-32b"
    assert llm.model_for("fast") == "qwen3-8b"
    # The factory has no sleep parameter; swap only the sleep, keeping the configured retry bound.
    llm._policy = dataclasses.replace(llm._policy, sleep=sleeps)
    with pytest.raises(LLMTransientError):
        ask(llm)
    assert len(server.requests) == 2
    assert str(server.requests[0].url) == "https://compat.example.org/openai/v1/chat/completions"
    assert server.requests[0].headers["x-stainless-read-timeout"] == "5.0"


def test_api_key_override_is_used_for_that_adapter_only() -> None:
    configured = "sk-ant-api03-CONFIGURED-000000000000"
    config = settings(ANTHROPIC_API_KEY=configured)
    server = FakeServer(anthropic_message([anthropic_tool_use(PLAN_INPUT)]))

    llm = build_llm(config, api_key_override=ANTHROPIC_KEY, http_client=server.client())
    ask(llm)

    sent = server.requests[0].headers
    assert ANTHROPIC_KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert configured not in str(dict(sent))
    # The configured key is untouched and still used by adapters built without an override.
    assert config.anthropic_api_key is not None
    assert config.anthropic_api_key.get_secret_value() == configured
    assert_no_secret(llm.describe(), repr(llm), repr(config))


def test_api_key_override_in_auto_mode_is_routed_by_its_shape() -> None:
    assert isinstance(build_llm(settings(), api_key_override=ANTHROPIC_KEY), AnthropicLLM)
    assert isinstance(build_llm(settings(), api_key_override=OPENAI_KEY), OpenAILLM)
    # A configured Anthropic key does not capture an OpenAI key brought by the caller.
    config = settings(ANTHROPIC_API_KEY="sk-ant-api03-CONFIGURED-000000000000")
    assert isinstance(build_llm(config, api_key_override=OPENAI_KEY), OpenAILLM)
    # An explicit provider takes the override as its key, whatever its shape.
    assert isinstance(build_llm(settings(llm="openai"), api_key_override="proxy-token-123"), OpenAILLM)
    assert isinstance(build_llm(settings(), api_key_override=""), NoLLM)


def test_factory_result_satisfies_the_port() -> None:
    llm: LLM = build_llm(settings(OPENAI_API_KEY=OPENAI_KEY))
    assert llm.available


# --- strict schema helper -----------------------------------------------------------------------


class Member(BaseModel):
    id: str
    note: str | None = None


class Group(BaseModel):
    members: list[Member]
    label: str = "misc"


class Outer(BaseModel):
    groups: list[Group]
    lead: Member = Field(description="The member the group is named after")
    backup: Member | None = None


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_strict_schema_closes_every_object_and_requires_every_property() -> None:
    original = Outer.model_json_schema()
    snapshot = json.dumps(original, sort_keys=True)

    strict = to_strict_json_schema(original)

    assert json.dumps(original, sort_keys=True) == snapshot
    objects = list(_objects(strict))
    assert len(objects) >= 4
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert strict["$defs"]["Member"]["required"] == ["id", "note"]
    assert strict["$defs"]["Group"]["required"] == ["members", "label"]
    assert "default" not in json.dumps(strict)


def test_strict_schema_inlines_refs_that_have_siblings() -> None:
    strict = to_strict_json_schema(Outer.model_json_schema())
    lead = strict["properties"]["lead"]
    assert "$ref" not in lead
    assert lead["description"] == "The member the group is named after"
    assert lead["properties"].keys() == {"id", "note"}
    assert lead["additionalProperties"] is False
    # A bare `$ref` is allowed and left alone.
    assert strict["properties"]["backup"]["anyOf"][0] == {"$ref": "#/$defs/Member"}


def test_strict_schema_still_validates_what_pydantic_accepts() -> None:
    strict = to_strict_json_schema(Plan.model_json_schema())
    assert strict == {
        "properties": {
            "groups": {
                "items": {"items": {"type": "string"}, "type": "array"},
                "title": "Groups",
                "type": "array",
            },
            "reason": {"title": "Reason", "type": "string"},
        },
        "required": ["groups", "reason"],
        "title": "Plan",
        "type": "object",
        "additionalProperties": False,
    }


class Node(BaseModel):
    name: str
    child: Node | None = None
    twin: Node = Field(description="recursion through a described $ref")


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Cat | Dog = Field(discriminator="kind")
    tags: dict[str, str]


def test_strict_schema_terminates_on_recursive_models() -> None:
    strict = to_strict_json_schema(Node.model_json_schema())
    node = strict["$defs"]["Node"]
    assert node["additionalProperties"] is False
    assert node["required"] == ["name", "child", "twin"]


def test_strict_schema_turns_one_of_into_any_of_and_leaves_dicts_open() -> None:
    strict = to_strict_json_schema(Pet.model_json_schema())
    pet = strict["properties"]["pet"]
    assert "oneOf" not in pet and "discriminator" not in pet
    assert len(pet["anyOf"]) == 2
    # `dict[str, str]` has no strict form; it is left for the API to reject with a clear 400.
    assert strict["properties"]["tags"]["additionalProperties"] == {"type": "string"}


def test_no_llm_imports_no_provider_sdk() -> None:
    """The providers' SDKs (thousands of modules, ~160,000 objects that every full garbage collection
    walks) are imported only by the adapter that needs them: a process without an LLM never holds them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from engram.adapters.llm import NoLLM, build_llm\n"
        "from engram.services.config import Settings\n"
        "assert isinstance(build_llm(Settings(llm='none')), NoLLM)\n"
        "assert isinstance(build_llm(Settings(llm='auto')), NoLLM)\n"
        "print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))\n"
    )
    keys = ("ENGRAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", "ENGRAM_OPENAI_API_KEY", "OPENAI_API_KEY")
    env = {"PATH": "/usr/bin:/bin", **dict.fromkeys(keys, "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.strip() == "[]"
