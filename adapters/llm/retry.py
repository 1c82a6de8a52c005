"""What both LLM adapters share: bounded retries, error wording, key redaction, the call log line.

The SDK clients are built with `max_retries=0` so that this module is the only
place that decides what is retried, how long to wait, and how a failure reads.
"""

from __future__ import annotations

import email.utils
import http
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from engram.services.ports import LLMBadResponse, LLMError, LLMMalformedAnswer, LLMTransientError

R = TypeVar("R")

TASK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Both vendors' keys start with `sk-` (`sk-ant-…`, `sk-proj-…`); error bodies
# sometimes quote a partly masked key, which is still more than we want to keep.
_KEY_LIKE = re.compile(r"sk-[A-Za-z0-9_*.\-]{6,}")

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
# A 429 that means "no money left" will not clear up by waiting.
_NOT_TRANSIENT_CODES = frozenset({"insufficient_quota", "billing_error"})

WRONG_SHAPE_RETRIES = 1

_HINTS = {
    401: "check the API key",
    403: "the API key lacks permission for this model or endpoint",
    404: "check the model name and the base URL",
}


def check_task_name(task: str) -> None:
    """Both APIs reject tool / schema names outside this pattern; fail before spending a request."""
    if not TASK_NAME.fullmatch(task):
        raise ValueError(f"task name {task!r} must match {TASK_NAME.pattern}")


class Redactor:
    """Scrubs one secret (and anything key-shaped) from text meant for messages and logs."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str) -> None:
        self._secret = secret

    def __call__(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "[redacted]")
        return _KEY_LIKE.sub("[redacted]", text)

    def __repr__(self) -> str:
        return "Redactor(***)"


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; `sleep` and `jitter` are injectable so tests never wait."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random

    def delay(self, retry_number: int, retry_after_s: float | None = None) -> float:
        """Wait before retry `retry_number` (1-based).

        The jitter only stretches a step by up to 25 %, so successive waits still
        grow; a server's `retry-after` is honoured when it asks for longer.
        """
        step = self.base_delay_s * 2.0 ** (retry_number - 1)
        wait = step * (1.0 + 0.25 * self.jitter())
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return min(wait, self.max_delay_s)


@dataclass(frozen=True)
class Failure:
    """How one failed attempt is to be treated."""

    retryable: bool
    reason: str
    retry_after_s: float | None = None
    hint: str | None = None


def _error_detail(body: object) -> tuple[str | None, str | None]:
    """(type-or-code, message) from either vendor's error body.

    Anthropic: `{"type": "error", "error": {"type": ..., "message": ...}}`;
    OpenAI (the SDK already unwraps `error`): `{"message": ..., "type": ..., "code": ...}`.
    """
    if not isinstance(body, Mapping):
        return None, None
    inner = body.get("error")
    err: Mapping[str, Any] = inner if isinstance(inner, Mapping) else body
    code = err.get("code") or err.get("type")
    message = err.get("message")
    return (
        str(code) if code is not None else None,
        str(message) if message is not None else None,
    )


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def failure_for_status(status: int, headers: Mapping[str, str], body: object) -> Failure:
    code, message = _error_detail(body)
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Overloaded" if status == 529 else "Unknown"
    reason = f"HTTP {status} {phrase}"
    if code or message:
        reason += ": " + ": ".join(part for part in (code, message) if part)

    retryable = status in _RETRYABLE_STATUSES or status >= 500
    if code in _NOT_TRANSIENT_CODES:
        retryable = False
    # The servers know better than a status table (e.g. a 409 that will not resolve).
    should_retry = headers.get("x-should-retry")
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    return Failure(
        retryable=retryable,
        reason=reason,
        retry_after_s=_retry_after_s(headers) if retryable else None,
        hint=_HINTS.get(status),
    )


@dataclass
class CallRecord:
    """Filled in while a call runs, logged once when it ends."""

    attempts: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    last_failure: str | None = None


@contextmanager
def logged_call(
    log: Any,
    *,
    provider: str,
    task: str,
    model: str,
    model_class: str,
) -> Iterator[CallRecord]:
    """One log line per `complete`: never the prompt, never the key (messages are redacted upstream)."""
    record = CallRecord()
    started = time.monotonic()
    outcome = "ok"
    error: str | None = None
    try:
        yield record
    except LLMMalformedAnswer as exc:
        outcome, error = "malformed", str(exc)
        raise
    except LLMBadResponse as exc:
        outcome, error = "bad_response", str(exc)
        raise
    except LLMTransientError as exc:
        outcome, error = "transient", str(exc)
        raise
    except LLMError as exc:
        outcome, error = "error", str(exc)
        raise
    except BaseException as exc:
        # Unexpected: only the type, since its message was not written with secrets in mind.
        outcome, error = "crash", type(exc).__name__
        raise
    finally:
        fields: dict[str, Any] = {
            "provider": provider,
            "task": task,
            "model": model,
            "model_class": model_class,
            "duration_ms": round((time.monotonic() - started) * 1000.0, 1),
            "attempts": record.attempts,
            "outcome": outcome,
            **record.usage,
        }
        if error is not None:
            fields["error"] = error
        if record.last_failure is not None and outcome == "ok":
            fields["recovered_from"] = record.last_failure
        if outcome == "ok":
            log.info("llm.complete", **fields)
        else:
            log.warning("llm.complete", **fields)


def call_with_retries(
    call: Callable[[], R],
    *,
    provider: str,
    classify: Callable[[Exception], Failure | None],
    policy: RetryPolicy,
    redact: Redactor,
    record: CallRecord,
) -> R:
    """Run `call`, retrying transient failures at most `policy.max_retries` times.

    A body that held no answer (`LLMBadResponse`, raised by `call` itself) is retried like a transient
    failure when it looks like a proxy's or gateway's hiccup (an HTML page, an empty or non-JSON body),
    but JSON of the wrong shape only once: a server that answers it twice will answer it again.

    SDK exceptions are replaced (`from None`): their messages and attached
    requests can carry the key or a masked copy of it, and ours must not.
    """
    wrong_shapes = 0
    while True:
        record.attempts += 1
        try:
            return call()
        except LLMBadResponse as exc:
            record.last_failure = str(exc)
            if exc.kind == "wrong_shape":
                wrong_shapes += 1
            if record.attempts > policy.max_retries or wrong_shapes > WRONG_SHAPE_RETRIES:
                raise
            policy.sleep(policy.delay(record.attempts))
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            reason = redact(failure.reason)
            record.last_failure = reason
            if not failure.retryable:
                hint = f" ({failure.hint})" if failure.hint else ""
                raise LLMError(f"{provider} rejected the request: {reason}{hint}") from None
            if record.attempts > policy.max_retries:
                raise LLMTransientError(
                    f"{provider} still failing after {record.attempts} attempts: {reason}"
                ) from None
            policy.sleep(policy.delay(record.attempts, failure.retry_after_s))


def validation_summary(exc: ValidationError, limit: int = 5) -> str:
    """Short, input-free wording of a validation error (the input is kept in `raw` instead)."""
    errors = exc.errors(include_input=False, include_url=False)
    parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"… {len(errors) - limit} more")
    return "; ".join(parts)
