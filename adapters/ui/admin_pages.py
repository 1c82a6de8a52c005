"""The admin page (`/ui/admin`, admin tokens only; a being token gets the 403 page): the views'
status, their rebuild with live progress, tokens (create — shown once —, revoke), erasure of a being,
and the hash chain's verify.

Every form is a POST with the page's CSRF token. A rebuild and a verify run in the background
(`admin_jobs.py`); their page polls its own progress (`data-live`) until the job is done. The calls
are those of the HTTP API and the CLI: `views.status/rebuild`, the token service, `forgetting`,
`chain_check.verify`.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from engram.adapters.eventstore import chain_check
from engram.adapters.ui.admin_jobs import Job, jobs_of
from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, engram_of, require_admin, ui_router
from engram.adapters.ui.session import Viewer, checked_form
from engram.domain.errors import InvalidInput
from engram.domain.token import MAX_LABEL_CHARS
from engram.services.beings import resolve_being
from engram.services.errors import NotFound
from engram.services.tokens import TokenService

MAX_TOKENS_SHOWN = 200


def _tokens(request: Request) -> TokenService:
    found: TokenService = request.app.state.tokens
    return found


def _overview(request: Request, include_revoked: bool) -> dict[str, Any]:
    engram = engram_of(request)
    tokens = _tokens(request).list(include_revoked=include_revoked)
    return {
        "views": engram.views.status(),
        "tokens": tokens[:MAX_TOKENS_SHOWN],
        "tokens_total": len(tokens),
        "jobs": jobs_of(request.app.state).recent(),
        "include_revoked": include_revoked,
    }


@ui_router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request, viewer: ViewerDep, revoked: int = 0) -> Response:
    require_admin(viewer)
    return page(request, "admin.html", viewer, **_overview(request, bool(revoked)))


async def _admin_form(request: Request, viewer: Viewer) -> dict[str, str]:
    form = await checked_form(request, viewer)
    require_admin(viewer)
    return form


def _by(viewer: Viewer) -> str:
    return f"token:{viewer.principal.token_id}" if viewer.principal.token_id else "admin"


# -- rebuild and verify: background jobs --------------------------------------------------------


@ui_router.post("/admin/rebuild", response_class=HTMLResponse)
async def start_rebuild(request: Request, viewer: ViewerDep) -> Response:
    form = await _admin_form(request, viewer)
    engram = engram_of(request)
    name = form.get("view", "")
    if name not in engram.views.names():
        raise NotFound(f"no view named {name!r}")

    def work(job: Job) -> dict[str, Any]:
        return {"generation": engram.views.rebuild(name, progress=job.progress)}

    job = jobs_of(request.app.state).start("rebuild", name, work)
    return RedirectResponse(f"/ui/admin/jobs/{job.id}", status_code=303)


@ui_router.post("/admin/verify", response_class=HTMLResponse)
async def start_verify(request: Request, viewer: ViewerDep) -> Response:
    await _admin_form(request, viewer)
    engram = engram_of(request)

    def work(job: Job) -> dict[str, Any]:
        head = engram.store.head()
        job.progress(0, head)
        verdict = chain_check.verify(engram.store.app, 0, lambda checked: job.progress(checked, head))
        return {
            "ok": verdict.ok,
            "checked": verdict.checked,
            "head_position": verdict.head_position,
            "head_hash": verdict.head_hash,
            "broken_at": verdict.broken_at,
            "reason": verdict.reason,
            "unsealed": verdict.unsealed,
        }

    job = jobs_of(request.app.state).start("verify", "hash chain", work)
    return RedirectResponse(f"/ui/admin/jobs/{job.id}", status_code=303)


@ui_router.get("/admin/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str, viewer: ViewerDep) -> Response:
    require_admin(viewer)
    job = jobs_of(request.app.state).get(job_id)
    if job is None:
        raise NotFound("no such job on this server (jobs are forgotten when it restarts)")
    return page(request, "admin_job.html", viewer, job=job)


# -- tokens ---------------------------------------------------------------------------------------


@ui_router.post("/admin/tokens", response_class=HTMLResponse)
async def create_token(request: Request, viewer: ViewerDep) -> Response:
    form = await _admin_form(request, viewer)
    being = form.get("being", "").strip() or None
    label = form.get("label", "").strip()
    admin = form.get("scope") == "admin"
    issued = await anyio.to_thread.run_sync(
        lambda: _tokens(request).issue(being=None if admin else being, admin=admin, label=label)
    )
    # The token is in this response only: never stored, never in a URL, the page not cached.
    return page(request, "admin_token.html", viewer, status=201, issued=issued)


@ui_router.post("/admin/tokens/{token_id}/revoke", response_class=HTMLResponse)
async def revoke_token(request: Request, token_id: str, viewer: ViewerDep) -> Response:
    form = await _admin_form(request, viewer)
    reason = form.get("reason", "").strip()[:MAX_LABEL_CHARS] or "revoked on the admin page"
    await anyio.to_thread.run_sync(lambda: _tokens(request).revoke(token_id, reason))
    return RedirectResponse("/ui/admin#tokens", status_code=303)


# -- erasure --------------------------------------------------------------------------------------


@ui_router.post("/admin/forget", response_class=HTMLResponse)
async def forget_being(request: Request, viewer: ViewerDep) -> Response:
    form = await _admin_form(request, viewer)
    engram = engram_of(request)
    ref, typed = form.get("being", "").strip(), form.get("confirm", "").strip()
    if not ref:
        raise InvalidInput("name the being to forget")

    def forget() -> Any:
        found = resolve_being(engram.store, ref)
        if typed != found.name:
            raise InvalidInput(f"type the being's name, {found.name}, in the confirmation field to forget it")
        return engram.forgetting.forget_being(ref, by=_by(viewer))

    forgotten = await anyio.to_thread.run_sync(forget)
    return page(request, "admin_forgotten.html", viewer, forgotten=forgotten, ref=ref)
