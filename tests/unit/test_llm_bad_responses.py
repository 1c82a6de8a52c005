"""Issue #7 items 4 and 7 in the adapters: a 2xx body that holds no answer, and answers over the cap.

The real `openai` / `anthropic` SDK clients run over an `httpx2.MockTransport` (see
`test_llm_adapters`): an HTML page, a non-JSON or empty body and JSON of the wrong shape each become an
`LLMBadResponse` (code `llm_bad_response`) with the status, the content type and the first bytes,
retried where a retry can help (ADR 0026); an answer over the cap is refused before it is parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import httpx2
import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from engram.adapters.llm import AnthropicLLM, OpenAILLM, build_llm
from engram.services.config import Settings
from engram.services.llm_answers import (
    FIRST_BYTES,
    KEPT_OF_A_CUT_ANSWER,
    capped,
    first_bytes,
    size_label,
    utf8_size,
)
from engram.services.ports import (
    LLM,
    LLMAnswerTooLarge,
    LLMBadResponse,
    LLMMalformedAnswer,
    LLMTransientError,
)
from tests.unit.test_llm_adapters import FakeServer, Plan, Sleeps

OPENAI_KEY = "sk-proj-BADRESPONSE-never-print-me-0123456789"
ANTHROPIC_KEY = "sk-ant-api03-BADRESPONSE-never-print-me-0123456789"
TASK = "consolidate_cluster"
PLAN = {"groups": [["n1", "n2"]], "reason": "the same trip"}


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs() as captured:
        yield captured


def openai(server: FakeServer, sleeps: Sleeps, **kwargs: Any) -> OpenAILLM:
    kwargs.setdefault("max_retries", 3)
    return OpenAILLM(
        api_key=OPENAI_KEY,
        base_url="https://llm-proxy.example.com/v1",
        http_client=server.client(),
        sleep=sleeps,
        jitter=lambda: 0.0,
        **kwargs,
    )


def anthropic(server: FakeServer, sleeps: Sleeps, **kwargs: Any) -> AnthropicLLM:
    kwargs.setdefault("max_retries", 3)
    return AnthropicLLM(
        api_key=ANTHROPIC_KEY, http_client=server.client(), sleep=sleeps, jitter=lambda: 0.0, **kwargs
    )


def ask(llm: LLM) -> Plan:
    answer = llm.complete(task=TASK, system="system", prompt="prompt", schema=Plan, model_class="reasoning")
    assert isinstance(answer.parsed, Plan)
    return answer.parsed


def completion(content: str | None, **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-5.4",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop",
            }
        ],
    }


def message(content: Any) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": content}


def tool_use(tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": TASK, "input": tool_input}


def body(status: int, content: bytes, content_type: str | None) -> httpx2.Response:
    headers = {"content-type": content_type} if content_type else {}
    return httpx2.Response(status, headers=headers, content=content)


def as_json(data: Any) -> httpx2.Response:
    return httpx2.Response(200, json=data)


HTML = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>corporate proxy</body></html>"

# What a proxy, a gateway or a half-compatible server sends with status 200 instead of an answer.
NOT_AN_ANSWER: dict[str, tuple[Callable[[], httpx2.Response], str, str]] = {
    "html": (lambda: body(200, HTML, "text/html; charset=utf-8"), "not_json", "text/html"),
    "not-json": (lambda: body(200, b"upstream said: OK", "application/json"), "not_json", "application/json"),
    "text-plain": (lambda: body(200, b"OK", "text/plain"), "not_json", "text/plain"),
    "not-utf8": (
        lambda: body(200, b"\xff\xfe\x00garbage", "application/json"),
        "not_json",
        "application/json",
    ),
    "empty": (lambda: body(200, b"", "application/json"), "empty", "application/json"),
    "empty-no-type": (lambda: body(200, b"", None), "empty", ""),
    "blank": (lambda: body(200, b"  \r\n", "application/json"), "empty", "application/json"),
}

OPENAI_WRONG_SHAPES: dict[str, Any] = {
    "no-choices": {"id": "x", "object": "chat.completion"},
    "choices-empty": {"choices": []},
    "content-null": completion(None),
    "choices-not-a-list": {"choices": "all of them"},
    "message-missing": {"choices": [{"index": 0, "finish_reason": "stop"}]},
    "not-an-object": [1, 2],
    "a-string": "hello",
    "model-name-of-10-kb": {**completion(json.dumps(PLAN)), "model": "m" * 10_000},  # it would be recorded
}

ANTHROPIC_WRONG_SHAPES: dict[str, Any] = {
    "no-content": {"type": "message", "role": "assistant", "stop_reason": "end_turn"},
    "content-null": message(None),
    "content-empty": message([]),
    "content-a-string": message("here you go"),
    "block-without-type": message([{"name": TASK, "input": PLAN}]),
    "not-an-object": [],
    "stop-reason-of-10-kb": {**message([tool_use(PLAN)]), "stop_reason": "s" * 10_000},
}

MAKERS = {"openai": openai, "anthropic": anthropic}


# -- classification -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", MAKERS)
@pytest.mark.parametrize("case", NOT_AN_ANSWER)
def test_a_200_without_an_answer_is_an_llm_bad_response(
    provider: str, case: str, sleeps: Sleeps, logs: list[MutableMapping[str, Any]]
) -> None:
    make, kind, content_type = NOT_AN_ANSWER[case]
    reply = make()
    server = FakeServer(reply)

    with pytest.raises(LLMBadResponse) as caught:
        ask(MAKERS[provider](server, sleeps, max_retries=0))

    exc = caught.value
    assert (exc.code, exc.kind, exc.status, exc.content_type) == ("llm_bad_response", kind, 200, content_type)
    assert exc.retryable is False  # what patrol sees: the adapter's own retries are spent
    assert exc.first_bytes == first_bytes(reply.content, lambda text: text)
    message = str(exc)
    assert message.startswith(f"{provider} answered HTTP 200 with ")
    assert f"content type {content_type or 'none'}" in message
    if case == "html":
        assert "an HTML page" in message and "<!DOCTYPE html>" in exc.first_bytes
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)  # no SDK chain
    assert [line["outcome"] for line in logs] == ["bad_response"]


@pytest.mark.parametrize(
    ("provider", "shape"),
    [("openai", s) for s in OPENAI_WRONG_SHAPES] + [("anthropic", s) for s in ANTHROPIC_WRONG_SHAPES],
)
def test_json_of_the_wrong_shape_is_an_llm_bad_response_retried_once(
    provider: str, shape: str, sleeps: Sleeps
) -> None:
    data = (OPENAI_WRONG_SHAPES if provider == "openai" else ANTHROPIC_WRONG_SHAPES)[shape]
    server = FakeServer(as_json(data))

    with pytest.raises(LLMBadResponse) as caught:
        ask(MAKERS[provider](server, sleeps, max_retries=3))

    assert caught.value.kind == "wrong_shape" and caught.value.status == 200
    assert caught.value.content_type == "application/json"
    assert "JSON of the wrong shape" in str(caught.value)
    assert len(str(caught.value)) < 1500  # it becomes a recorded reason: bounded whatever the body holds
    assert len(server.requests) == 2 and len(sleeps) == 1  # one retry, though three are allowed


# -- retries --------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", MAKERS)
@pytest.mark.parametrize("case", ["html", "not-json", "empty"])
def test_a_proxy_page_is_retried_like_a_5xx_then_reported(provider: str, case: str, sleeps: Sleeps) -> None:
    make, _, _ = NOT_AN_ANSWER[case]
    server = FakeServer(make())
    with pytest.raises(LLMBadResponse):
        ask(MAKERS[provider](server, sleeps, max_retries=2))
    assert len(server.requests) == 3
    assert sleeps == sorted(sleeps) and sleeps[0] < sleeps[1]


@pytest.mark.parametrize(
    ("provider", "good"),
    [("openai", as_json(completion(json.dumps(PLAN)))), ("anthropic", as_json(message([tool_use(PLAN)])))],
)
def test_a_passing_glitch_recovers(
    provider: str, good: httpx2.Response, sleeps: Sleeps, logs: list[MutableMapping[str, Any]]
) -> None:
    html = NOT_AN_ANSWER["html"][0]()
    wrong = as_json({"choices": []} if provider == "openai" else message([]))
    server = FakeServer(html, wrong, good)
    assert ask(MAKERS[provider](server, sleeps)).reason == PLAN["reason"]
    assert len(server.requests) == 3
    (line,) = logs
    assert line["outcome"] == "ok" and "wrong shape" in line["recovered_from"]


def test_wrong_shape_twice_is_final_even_after_other_failures(sleeps: Sleeps) -> None:
    rate_limited = httpx2.Response(
        429, json={"error": {"message": "slow down", "type": "tokens", "code": None}}
    )
    server = FakeServer(rate_limited, as_json({}), as_json({}))
    with pytest.raises(LLMBadResponse, match="wrong shape"):
        ask(openai(server, sleeps, max_retries=5))
    assert len(server.requests) == 3


def test_zero_retries_means_one_attempt_for_a_bad_response_too(sleeps: Sleeps) -> None:
    server = FakeServer(as_json({}))
    with pytest.raises(LLMBadResponse):
        ask(openai(server, sleeps, max_retries=0))
    assert len(server.requests) == 1 and sleeps == []


# -- what a bad response keeps of the body ----------------------------------------------------------


@pytest.mark.parametrize("provider", MAKERS)
def test_the_first_bytes_are_capped_escaped_and_free_of_keys(provider: str, sleeps: Sleeps) -> None:
    key = OPENAI_KEY if provider == "openai" else ANTHROPIC_KEY
    page = f"<html>\x1b[31mDenied\x00 for Authorization: Bearer {key}\u202e</html>".encode() + b"x" * 100_000
    server = FakeServer(body(200, page, "text/html"))

    with pytest.raises(LLMBadResponse) as caught:
        ask(MAKERS[provider](server, sleeps, max_retries=0))

    head = caught.value.first_bytes
    for text in (head, str(caught.value), repr(caught.value)):
        assert key not in text and "BADRESPONSE" not in text
    assert "[redacted]" in head
    assert "\\x1b[31mDenied\\x00" in head and "\\u202e" in head  # escaped, not sent to a terminal
    assert not any(ord(c) < 0x20 for c in head)
    assert head.endswith(f"…[cut: {len(page):,} bytes]")
    assert utf8_size(head) < FIRST_BYTES + 100


def test_an_error_status_with_an_html_body_stays_an_http_error(sleeps: Sleeps) -> None:
    """Classification by status comes first: a 502 page from a proxy is a 5xx, retried and transient."""
    server = FakeServer(body(502, b"<html>Bad Gateway</html>", "text/html"))
    with pytest.raises(LLMTransientError, match="HTTP 502 Bad Gateway"):
        ask(openai(server, sleeps, max_retries=1))
    assert len(server.requests) == 2


# -- the answer cap ---------------------------------------------------------------------------------


def test_an_openai_answer_over_the_cap_is_refused_unparsed(sleeps: Sleeps) -> None:
    huge = json.dumps({"groups": [["n1", "n2"]], "reason": "x" * (4 * 1024 * 1024)})
    server = FakeServer(as_json(completion(huge)))

    with pytest.raises(LLMAnswerTooLarge) as caught:
        ask(openai(server, sleeps, max_answer_bytes=32 * 1024))

    exc = caught.value
    assert isinstance(exc, LLMMalformedAnswer) and exc.code == "llm_answer_too_large"
    assert exc.size == utf8_size(huge)
    assert exc.raw.startswith('{"groups": [["n1", "n2"]], "reason": "xxx')
    assert exc.raw.endswith(f"…[cut: {utf8_size(huge):,} bytes, cap 32 KiB]")
    assert utf8_size(exc.raw) <= KEPT_OF_A_CUT_ANSWER
    assert "over the cap of 32 KiB" in str(exc)
    assert len(server.requests) == 1  # the answer is valid JSON of the right shape, yet never used


def test_an_anthropic_tool_input_over_the_cap_is_refused_unparsed(sleeps: Sleeps) -> None:
    server = FakeServer(as_json(message([tool_use({"groups": [["n"] * 100_000], "reason": "many"})])))
    with pytest.raises(LLMAnswerTooLarge) as caught:
        ask(anthropic(server, sleeps, max_answer_bytes=8 * 1024))
    assert caught.value.size > 8 * 1024 and "cap 8 KiB]" in caught.value.raw


@pytest.mark.parametrize("provider", MAKERS)
def test_an_answer_at_the_cap_is_used(provider: str, sleeps: Sleeps) -> None:
    if provider == "openai":
        raw = json.dumps(PLAN)
        reply = as_json(completion(raw))
    else:
        raw = json.dumps(PLAN, sort_keys=True, ensure_ascii=False)
        reply = as_json(message([tool_use(PLAN)]))
    llm = MAKERS[provider](FakeServer(reply), sleeps, max_answer_bytes=utf8_size(raw))
    assert ask(llm).reason == PLAN["reason"]
    with pytest.raises(LLMAnswerTooLarge):
        ask(MAKERS[provider](FakeServer(reply), sleeps, max_answer_bytes=utf8_size(raw) - 1))


def test_a_long_refusal_is_kept_capped(sleeps: Sleeps) -> None:
    server = FakeServer(as_json(completion(None, refusal="no " * 100_000)))
    with pytest.raises(LLMMalformedAnswer, match="refused") as caught:
        ask(openai(server, sleeps, max_answer_bytes=4096))
    assert utf8_size(caught.value.raw) <= 4096 and "…[cut: 300,000 bytes, cap 4 KiB]" in caught.value.raw


def test_the_cap_comes_from_the_settings(sleeps: Sleeps) -> None:
    settings = Settings(llm="openai", OPENAI_API_KEY=OPENAI_KEY, OPENAI_BASE_URL=None, llm_max_answer_kib=1)
    reply = as_json(completion(json.dumps({**PLAN, "reason": "y" * 2000})))
    with pytest.raises(LLMAnswerTooLarge, match="over the cap of 1 KiB"):
        ask(build_llm(settings, http_client=FakeServer(reply).client()))
    assert Settings().llm_max_answer_kib == 64
    for wrong in (0, 1025):
        with pytest.raises(ValidationError):
            Settings(llm_max_answer_kib=wrong)


# -- the helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [40, 100, 1024, 64 * 1024])
def test_capped_never_exceeds_the_cap_and_marks_the_cut(cap: int) -> None:
    for text in ("a" * (cap + 1), "é" * cap, "🙂" * cap, "x" * 5_000_000):
        kept = capped(text, cap)
        assert utf8_size(kept) <= min(cap, KEPT_OF_A_CUT_ANSWER)
        assert kept.endswith(f" bytes, cap {size_label(cap)}]")
        assert "\ufffd" not in kept  # a character cut in two is dropped, not mangled
    assert capped("é" * 10, 20) == "é" * 10  # exactly at the cap: kept whole
