"""Who is looking at a page: a bearer token from the `Authorization` header (scripts) or from the
HTTP-only cookie the login form sets (people), and the CSRF token every state-changing form carries.

The cookie holds the token itself (`HttpOnly`, `SameSite=Strict`, `Secure` behind HTTPS), so
revoking the token logs the page out at its next request. The CSRF token is an HMAC of the session's
token under a secret of this server process (stdlib `hmac`): a form posted from another site cannot
know it, and it needs no server-side state (ADR 0084).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs

import anyio.to_thread
from fastapi import Request

from engram.services.tokens import Principal, TokenService

COOKIE = "engram_ui_token"
CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 64 * 1024


class LoginRequired(Exception):
    """No valid token: the page sends the browser to the login form (scripts get 401)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Forbidden(Exception):
    """A valid token that may not see this page (another being's, or an admin page)."""


class BadForm(Exception):
    """A state-changing form without a valid CSRF token, or not a form at all."""


@dataclass(frozen=True)
class Viewer:
    principal: Principal
    token: str | None  # None in the development mode (`serve --no-auth`)
    scripted: bool  # the token came in an `Authorization` header, not from the browser's cookie

    @property
    def is_admin(self) -> bool:
        return self.principal.is_admin


def _secret(request: Request) -> bytes:
    state = request.app.state
    found = getattr(state, "ui_csrf_secret", None)
    if not isinstance(found, bytes):
        found = state.ui_csrf_secret = secrets.token_bytes(32)
    return found


def csrf_token(request: Request, viewer: Viewer) -> str:
    material = (viewer.token or "dev").encode()
    return hmac.new(_secret(request), material, hashlib.sha256).hexdigest()


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


async def viewer_of(request: Request) -> Viewer:
    """The verified caller of a page; `LoginRequired` when there is none or the token is dead."""
    dev = getattr(request.app.state, "ui_dev_principal", None)
    header = _bearer(request)
    if isinstance(dev, Principal):
        return Viewer(principal=dev, token=None, scripted=header is not None)
    token = header or request.cookies.get(COOKIE) or None
    if token is None:
        raise LoginRequired()
    tokens: TokenService = request.app.state.tokens
    found = await anyio.to_thread.run_sync(tokens.verify, token)
    if found is None:
        raise LoginRequired("That token is unknown, expired or revoked. Log in again.")
    return Viewer(principal=found, token=token, scripted=header is not None)


async def read_form(request: Request) -> dict[str, str]:
    """The posted form's fields (first value of each), bounded in size."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise BadForm("expected a form")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise BadForm("the form is too large")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError as exc:
        raise BadForm("the form is not UTF-8") from exc
    return {k: v[0] for k, v in fields.items()}


async def checked_form(request: Request, viewer: Viewer) -> dict[str, str]:
    """A state-changing form: refused unless it carries this session's CSRF token. A script with a
    bearer header is not a browser session that another site could ride, so it needs none."""
    form = await read_form(request)
    if not viewer.scripted and not hmac.compare_digest(form.get(CSRF_FIELD, ""), csrf_token(request, viewer)):
        raise BadForm("this form has expired or did not come from this page: reload it and try again")
    return form
