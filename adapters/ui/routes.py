"""The explorer's routes: login, logout, the beings page, error pages; the other pages add their own
modules' routes to `ui_router` (each page module owns its routes and templates).

Every route is a `UiRoute`: what the services refuse becomes a page a person can read (404, 403,
409…), never a traceback or a JSON problem; a missing or dead token goes back to the login form.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit
from uuid import UUID

import anyio.to_thread
import structlog
from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from engram.adapters.ui.render import page
from engram.adapters.ui.session import (
    COOKIE,
    BadForm,
    Forbidden,
    LoginRequired,
    Viewer,
    checked_form,
    read_form,
    viewer_of,
)
from engram.domain.errors import DomainError, InvalidInput
from engram.services.beings import resolve_being
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound

log = structlog.get_logger("engram.ui")

STATIC = Path(__file__).parent / "static"


def _status(exc: DomainError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidInput):
        return 422
    return 409


class UiRoute(APIRoute):
    """Turns refusals into pages (and a dead session into the login form)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                if request.headers.get("authorization"):
                    return page(
                        request,
                        "error.html",
                        None,
                        status=401,
                        title="Not logged in",
                        detail=exc.reason or "This page needs a token.",
                    )
                target = "/ui/login?next=" + quote(
                    _local(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                )
                if exc.reason:
                    target += "&expired=1"
                response = RedirectResponse(target, status_code=303)
                response.delete_cookie(COOKIE, path="/ui")
                return response
            except Forbidden as exc:
                return page(request, "error.html", None, status=403, title="Not allowed", detail=str(exc))
            except BadForm as exc:
                return page(request, "error.html", None, status=400, title="Form refused", detail=str(exc))
            except RequestValidationError as exc:  # e.g. `?before=abc` where a number is expected
                fields = ", ".join(
                    ".".join(str(x) for x in e.get("loc", ())[1:]) or "request" for e in exc.errors()
                )
                return page(
                    request, "error.html", None, status=422, title="Not understood", detail=f"Check {fields}."
                )
            except DomainError as exc:
                status = _status(exc)
                title = "Not found" if status == 404 else "Refused"
                return page(request, "error.html", None, status=status, title=title, detail=exc.message)
            except Exception:
                log.exception("ui page failed", path=request.url.path)
                return page(
                    request,
                    "error.html",
                    None,
                    status=500,
                    title="Something went wrong",
                    detail="The server could not show this page; its log has the details.",
                )

        return guarded


ui_router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)

ViewerDep = Annotated[Viewer, Depends(viewer_of)]


def engram_of(request: Request) -> Engram:
    engram: Engram = request.app.state.engram
    return engram


def being_for(request: Request, viewer: Viewer, ref: str) -> Any:
    """The being a page is about, if the viewer may see it: a being token sees only its own (403
    page for another's); an unknown name or id is a 404 page."""
    found = resolve_being(engram_of(request).store, ref)
    mine = viewer.principal.being_id
    if mine is not None and UUID(str(found.id)) != mine:
        raise Forbidden("This token belongs to another being: it cannot show this one.")
    return found


def require_admin(viewer: Viewer) -> None:
    if not viewer.is_admin:
        raise Forbidden("This page needs an admin token.")


def _local(target: str) -> str:
    """Only a path of this site is a place to go back to after logging in (no open redirect)."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/ui") or target.startswith("//"):
        return "/ui/beings"
    return target


# -- login -------------------------------------------------------------------------------------------


@ui_router.get("/", response_class=HTMLResponse)
async def home(viewer: ViewerDep) -> Response:
    if viewer.principal.being_id is not None:
        return RedirectResponse(f"/ui/beings/{viewer.principal.being_id}", status_code=303)
    return RedirectResponse("/ui/beings", status_code=303)


@ui_router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/ui/", expired: int = 0) -> Response:
    note = "Your session ended: the token is unknown, expired or revoked." if expired else ""
    return page(request, "login.html", None, next=_local(next), error=note)


@ui_router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await read_form(request)
    token, target = form.get("token", "").strip(), _local(form.get("next", "/ui/"))
    tokens = request.app.state.tokens
    found = await anyio.to_thread.run_sync(tokens.verify, token) if token else None
    if found is None:
        return page(request, "login.html", None, status=401, next=target, error="That token is not valid.")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/ui",
    )
    log.info("ui login", token_id=found.token_id)
    return response


@ui_router.post("/logout", response_class=HTMLResponse)
async def logout(request: Request, viewer: ViewerDep) -> Response:
    await checked_form(request, viewer)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


def mount_static(app: Any) -> None:
    """The explorer's style sheet and script, from the package (no CDN)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
