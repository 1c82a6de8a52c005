"""Reading a successful HTTP answer ourselves: a body that holds no answer is an `LLMBadResponse`.

The SDKs hand back whatever a 2xx body held: the text of an HTML page, a `JSONDecodeError`, or a
model object built without validation whose fields are missing or `None`. Each adapter therefore
takes the raw HTTP response and reads it here, against the few fields it needs (ADR 0026).
"""

from __future__ import annotations

import json
from typing import Annotated, TypeVar

import httpx2
from pydantic import BaseModel, StringConstraints, ValidationError

from engram.adapters.llm.retry import Redactor, validation_summary
from engram.services.llm_answers import first_bytes
from engram.services.ports import BadResponseKind, LLMBadResponse

E = TypeVar("E", bound=BaseModel)

Label = Annotated[str, StringConstraints(max_length=200)]
"""A model name or a stop reason: short in every real answer, and recorded, so bounded."""

_BASE_URL_HINT = "is the base URL that of an API, not of a web page or a login portal?"


def read_envelope(response: httpx2.Response, envelope: type[E], *, provider: str, redact: Redactor) -> E:
    """The response body as `envelope`, or the `LLMBadResponse` that says what came instead."""
    body = response.content
    if not body.strip():
        raise _bad(response, "empty", "an empty body", provider=provider, redact=redact)
    try:
        data = json.loads(body)
    except ValueError:  # also a body that is not UTF-8
        what = "an HTML page" if "html" in _content_type(response) else "a body that is not JSON"
        raise _bad(
            response, "not_json", f"{what} ({_BASE_URL_HINT})", provider=provider, redact=redact
        ) from None
    try:
        return envelope.model_validate(data)
    except ValidationError as exc:
        raise _bad(
            response,
            "wrong_shape",
            f"JSON of the wrong shape ({validation_summary(exc, limit=3)})",
            provider=provider,
            redact=redact,
        ) from None


def _content_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _bad(
    response: httpx2.Response, kind: BadResponseKind, what: str, *, provider: str, redact: Redactor
) -> LLMBadResponse:
    content_type = redact(_content_type(response))[:100]
    head = first_bytes(response.content, redact)
    return LLMBadResponse(
        f"{provider} answered HTTP {response.status_code} with {what}; "
        f"content type {content_type or 'none'}, first bytes: {head!r}",
        kind=kind,
        status=response.status_code,
        content_type=content_type,
        first_bytes=head,
    )
