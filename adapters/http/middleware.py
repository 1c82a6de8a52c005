"""The ASGI layers in front of the routes, outermost first:

1. `RequestLog`: a correlation id per request (`X-Request-Id` if valid, else a new one, echoed in the
   response), bound to every log line of the request; one structured line per request; an
   unexpected exception becomes a 500 problem instead of a traceback on the wire.
2. `Authenticate`: the bearer token of every `/v1/` request except the health check, verified
   before anything else runs (401), then the token's rate limit (429).
3. `BodyGuard`: the body size limit, checked on `Content-Length` before a byte is read and again
   while the body streams in (413), and JSON-only bodies (415).

None of them logs a header, a query string or a body: tokens and LLM keys never reach a log line.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Collection
from typing import Any

import anyio.to_thread
import structlog
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.adapters.http.problems import problem_response, status_for
from engram.adapters.storage_full import deployment_storage, is_storage_full
from engram.domain.errors import DomainError
from engram.domain.text import text_problems
from engram.services.errors import StorageFull
from engram.services.runner import correlation
from engram.services.tokens import Principal

log = structlog.get_logger("engram.http")

REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _state(scope: Scope) -> dict[str, Any]:
    state: dict[str, Any] = scope.setdefault("state", {})
    return state


class RequestLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("x-request-id", "")
        cid = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        state = _state(scope)
        state["correlation_id"] = cid
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message["headers"] = [
                    *[(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"],
                    (b"x-request-id", cid.encode()),
                ]
            await send(message)

        with correlation(cid):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception as exc:
                if is_storage_full(exc) and not response_started:  # found by a read: no file named
                    full = StorageFull(deployment_storage(scope["app"].state.engram.settings))
                    log.warning("request refused: no space left", path=full.path)
                    await problem_response(
                        status_for(full), full.code, full.message, correlation_id=cid, details=full.details
                    )(scope, receive, send_with_id)
                    return
                # A plain traceback, never one with local variables: those hold the request's headers.
                log.error(
                    "request failed",
                    error=f"{type(exc).__name__}: {exc}",
                    traceback="".join(traceback.format_exception(exc)),
                )
                if not response_started:
                    response = problem_response(
                        500,
                        "internal_error",
                        "an unexpected error occurred; see the server log",
                        correlation_id=cid,
                    )
                    await response(scope, receive, send_with_id)
            finally:
                route = scope.get("route")
                principal = state.get("principal")
                params = scope.get("path_params") or {}
                log.info(
                    "request",
                    method=scope.get("method"),
                    route=getattr(route, "path", None),
                    command=getattr(route, "name", None) or "unmatched",
                    being=params.get("being"),
                    being_id=state.get("being_id"),
                    token_id=(principal.token_id or "dev") if isinstance(principal, Principal) else None,
                    status=status,
                    duration_ms=round((time.perf_counter() - started) * 1000, 3),
                )


class TokenBuckets:
    """One token bucket per key: `burst` requests at once, refilled at `rate` per second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._mutex = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one request; 0 if allowed, else the seconds until one is available."""
        now = self.clock()
        with self._mutex:
            level, last = self._buckets.get(key, (self.burst, now))
            level = min(self.burst, level + (now - last) * self.rate)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, now)
                return 0.0
            self._buckets[key] = (level, now)
            return (1.0 - level) / self.rate


def bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


class Authenticate:
    """Verifies the bearer token of protected paths and applies the rate limit.

    `verify` is None in the development mode (`--no-auth`): every caller is an admin, rate-limited
    by client address.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        verify: Callable[[str], Principal | None] | None,
        buckets: TokenBuckets,
        protected_prefix: str = "/v1/",
        public: Collection[str] = (),
        dev_principal: Principal | None = None,
    ) -> None:
        self.app = app
        self.verify = verify
        self.buckets = buckets
        self.protected_prefix = protected_prefix
        self.public = frozenset(public)
        self.dev_principal = dev_principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self.protected_prefix) or path in self.public:
            await self.app(scope, receive, send)
            return
        state = _state(scope)
        cid = state.get("correlation_id")
        if self.verify is None:
            assert self.dev_principal is not None
            principal: Principal | None = self.dev_principal
            client = scope.get("client")
            key = f"client:{client[0] if client else 'unknown'}"
        else:
            token = bearer(Headers(scope=scope))
            if token is None:
                response = problem_response(
                    401,
                    "unauthenticated",
                    "this endpoint needs a bearer token: Authorization: Bearer eng_…",
                    correlation_id=cid,
                    headers={"WWW-Authenticate": 'Bearer realm="engram"'},
                )
                await response(scope, receive, send)
                return
            try:
                principal = await anyio.to_thread.run_sync(self.verify, token)
            except DomainError as exc:  # e.g. the tokens view did not catch up in time
                response = problem_response(status_for(exc), exc.code, exc.message, correlation_id=cid)
                await response(scope, receive, send)
                return
            if principal is None:
                response = problem_response(
                    401,
                    "invalid_token",
                    "the bearer token is unknown or revoked",
                    correlation_id=cid,
                    headers={"WWW-Authenticate": 'Bearer realm="engram", error="invalid_token"'},
                )
                await response(scope, receive, send)
                return
            key = f"token:{principal.token_id}"
        state["principal"] = principal
        wait = self.buckets.take(key)
        if wait > 0:
            response = problem_response(
                429,
                "rate_limited",
                "too many requests for this token; slow down",
                correlation_id=cid,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` when the streamed body passes the limit (FastAPI re-raises HTTP errors)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")


class NotText(StarletteHTTPException):
    """Input that decodes, but not to text the stores accept: a lone UTF-16 surrogate, or NUL."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(422, f"{field} {problem}")
        self.errors = [{"field": field, "message": problem}]


# JSON escapes that may decode to a lone surrogate (\ud800-\udfff) or to NUL (\u0000).
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")
_NUL_IN_URL = re.compile(rb"%00|\x00")


def body_text_problem(body: bytes) -> tuple[str, str] | None:
    """(where, why) for the first string of a JSON body that no store could keep, or None (the body
    is parsed only if an escape is suspect). `where` is named as validation errors name fields:
    `body.notes.1.text`. Text inside a string (a scene's JSON) is the services' to check."""
    if not _SUSPECT_ESCAPE.search(body):
        return None
    try:
        decoded = json.loads(body)
    except ValueError:
        return None  # not JSON at all: the route's parser answers that
    return next(text_problems(decoded, "body"), None)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _is_form(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == "application/x-www-form-urlencoded"


class BodyGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cid = _state(scope).get("correlation_id")
        if _NUL_IN_URL.search(scope.get("query_string", b"")) or "\x00" in scope.get("path", ""):
            await problem_response(
                422, "invalid_input", "the URL must not contain NUL characters (%00)", correlation_id=cid
            )(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit() and len(length) <= 18):
                await problem_response(400, "bad_request", "invalid Content-Length", correlation_id=cid)(
                    scope, receive, send
                )
                return
            if int(length) > self.limit:
                await problem_response(
                    413,
                    "payload_too_large",
                    f"the request body is larger than the limit of {self.limit} bytes",
                    correlation_id=cid,
                    details={"limit": self.limit},
                )(scope, receive, send)
                return
        content_type = headers.get("content-type")
        has_body = (length is not None and int(length) > 0) or "transfer-encoding" in headers
        form_page = scope.get("path", "").startswith("/ui/") and _is_form(
            content_type
        )  # the explorer's forms
        if (
            scope.get("method") in BODY_METHODS
            and has_body
            and content_type
            and not _is_json(content_type)
            and not form_page
        ):
            await problem_response(
                415,
                "unsupported_media_type",
                "request bodies are JSON: send Content-Type: application/json",
                correlation_id=cid,
            )(scope, receive, send)
            return

        received = 0
        started = False
        chunks: list[bytes] = []

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    problem = body_text_problem(b"".join(chunks))
                    if problem is not None:
                        raise NotText(*problem)
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except BodyTooLarge as exc:
            if started:
                raise
            await problem_response(413, "payload_too_large", str(exc.detail), correlation_id=cid)(
                scope, receive, send
            )
