"""Errors as RFC 9457 problem details (`application/problem+json`), one status per error class.

Every problem has `type`, `title`, `status`, `detail`, Engram's error `code`, the request's
`correlation_id`, and where it helps `errors` (one entry per invalid field) or `details`.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from engram.domain.errors import DomainError, InvalidInput, InvalidScene, InvariantViolation, PayloadTooLarge
from engram.projections.vector_index import ServiceUnavailable
from engram.services.errors import ConsistencyTimeout, NotFound, ServiceError, StorageFull

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:engram:problem:"

log = structlog.get_logger("engram.http")


class FieldError(BaseModel):
    field: str = Field(description="Where the problem is, e.g. `body.notes.3.text` or `scene.importance`.")
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details, plus Engram's `code`."""

    type: str = Field(description="`urn:engram:problem:<code>`.")
    title: str = Field(description="The HTTP status phrase.")
    status: int
    detail: str
    code: str = Field(description="Engram's error code, e.g. `not_found`, `invalid_scene`, `rate_limited`.")
    correlation_id: str | None = Field(None, description="The request's X-Request-Id.")
    errors: list[FieldError] | None = Field(None, description="Every invalid field, for validation errors.")
    details: dict[str, Any] | None = None


class ApiError(Exception):
    """An HTTP-level refusal raised by the adapter itself (auth, limits, malformed requests)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        errors: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers or {}
        self.errors = errors


def problem_body(
    status: int,
    code: str,
    detail: str,
    *,
    correlation_id: str | None = None,
    errors: list[dict[str, str]] | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + code,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        "correlation_id": correlation_id,
    }
    if errors is not None:
        body["errors"] = errors
    if details:
        body["details"] = details
    return body


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    correlation_id: str | None = None,
    headers: dict[str, str] | None = None,
    errors: list[dict[str, str]] | None = None,
    details: dict[str, Any] | None = None,
) -> Response:
    body = problem_body(status, code, detail, correlation_id=correlation_id, errors=errors, details=details)
    return Response(
        json.dumps(body, ensure_ascii=False, default=str),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def status_for(exc: DomainError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, PayloadTooLarge):
        return 413
    if isinstance(exc, InvalidInput):
        return 422
    if isinstance(exc, ConsistencyTimeout | ServiceUnavailable):  # retryable: Retry-After follows
        return 503
    if isinstance(exc, StorageFull):
        return 507
    if isinstance(exc, InvariantViolation):
        return 409
    if isinstance(exc, ServiceError) and type(exc) is ServiceError:
        return 500
    return 409  # conflicts, and any other rule of the domain that refused the command


def _cid(request: Request) -> str | None:
    value = getattr(request.state, "correlation_id", None)
    return value if isinstance(value, str) else None


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into a problem response."""

    async def domain_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DomainError)
        status = status_for(exc)
        errors = None
        details = {k: v for k, v in exc.details.items() if k != "errors"}
        if isinstance(exc, InvalidScene):
            errors = [
                {"field": str(e.get("field", "")), "message": str(e.get("message", ""))} for e in exc.errors
            ]
        elif isinstance(exc, InvalidInput) and "field" in exc.details:
            errors = [{"field": str(exc.details["field"]), "message": exc.message}]
        headers = {"Retry-After": "1"} if status == 503 else None
        return problem_response(
            status,
            exc.code,
            exc.message,
            correlation_id=_cid(request),
            errors=errors,
            details=details or None,
            headers=headers,
        )

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return problem_response(
            exc.status,
            exc.code,
            exc.detail,
            correlation_id=_cid(request),
            headers=exc.headers,
            errors=exc.errors,
        )

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return problem_response(
                400, "invalid_json", "the request body is not valid JSON", correlation_id=_cid(request)
            )
        # The input is never echoed back: it may be large, or a secret sent in a header.
        fields = [{"field": _location(e.get("loc", ())), "message": str(e.get("msg", ""))} for e in errors]
        return problem_response(
            422,
            "invalid_input",
            f"{len(fields)} invalid field(s): "
            + "; ".join(f"{f['field']}: {f['message']}" for f in fields[:5]),
            correlation_id=_cid(request),
            errors=fields,
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        codes = {
            400: "invalid_json",
            404: "not_found",
            405: "method_not_allowed",
            413: "payload_too_large",
            422: "invalid_input",
        }
        code = codes.get(exc.status_code, f"http_{exc.status_code}")
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such resource: {request.url.path}"
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path; there may be more.
            allowed: set[str] = set()
            for route in getattr(request.app.state, "api_routes", ()):
                match, _ = route.matches(request.scope)
                if match is not Match.NONE:
                    allowed |= set(getattr(route, "methods", None) or ())
            if allowed:
                headers["Allow"] = ", ".join(sorted(allowed))
        return problem_response(
            exc.status_code,
            code,
            detail,
            correlation_id=_cid(request),
            headers=headers,
            errors=getattr(exc, "errors", None),  # the body guard's (middleware.py `NotText`)
        )

    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


def _doc(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def add_problem_schemas(schema: dict[str, Any]) -> None:
    """Put `Problem` and `FieldError` into the OpenAPI components that the error responses refer to."""
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = problem.pop("$defs", {})
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(defs)
    components["Problem"] = problem


Responses = dict[int | str, dict[str, Any]]

COMMON: Responses = {
    401: _doc("No bearer token, or an unknown or revoked one."),
    404: _doc("No such being or resource (also: another being's resource)."),
    413: _doc("The body (or a note's text) is too large."),
    422: _doc("Invalid input; `errors` lists every invalid field."),
    429: _doc("Rate limit of this token exceeded; see Retry-After."),
    503: _doc("The read models did not catch up in time, or the vector index is unreachable; retry."),
    507: _doc("No space left on the server's storage (`storage_full`): nothing was written; retry later."),
    "default": _doc("Any other error, as problem details."),
}
BAD_JSON: Responses = {400: _doc("The body is not JSON.")}
CONFLICT: Responses = {
    409: _doc("Conflict: duplicate, idempotency key reuse, concurrency, or a domain rule.")
}
ADMIN: Responses = {403: _doc("The endpoint needs an admin token.")}
SENSITIVE: Responses = {403: _doc("Sensitive notes need an admin token.")}
