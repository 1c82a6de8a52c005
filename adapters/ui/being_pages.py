"""A being's overview page (`/ui/beings/{being}`)."""

from __future__ import annotations

from fastapi import Request, Response
from fastapi.responses import HTMLResponse

from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, being_for, engram_of, ui_router


@ui_router.get("/beings/{being}", response_class=HTMLResponse)
def being_overview(request: Request, being: str, viewer: ViewerDep) -> Response:
    found = being_for(request, viewer, being)
    engram = engram_of(request)
    engram.views.ensure(names=["beings"])
    row = engram.views.read.being(found.id)
    return page(request, "being.html", viewer, being=found, row=row or {})
