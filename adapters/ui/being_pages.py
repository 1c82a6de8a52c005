"""The beings page (`/ui/beings`) and a being's overview (`/ui/beings/{being}`): counts, the cluster
tree, the decay and patrol plots, the patrol runs a page at a time (services/being_overview.py)."""

from __future__ import annotations

from fastapi import Request, Response
from fastapi.responses import HTMLResponse

from engram.adapters.ui import plots
from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, being_for, engram_of, ui_router
from engram.domain.errors import InvalidInput
from engram.services import being_overview

RUNS_PER_PAGE = 10


@ui_router.get("/beings", response_class=HTMLResponse)
def beings(request: Request, viewer: ViewerDep) -> Response:
    rows = being_overview.beings(engram_of(request).views, viewer.principal.being_id)
    return page(request, "beings.html", viewer, beings=rows)


@ui_router.get("/beings/{being}", response_class=HTMLResponse)
def being_page(request: Request, being: str, viewer: ViewerDep, before: str | None = None) -> Response:
    found = being_for(request, viewer, being)
    if before is not None and not before.isdigit():
        raise InvalidInput(
            f"before={before!r}: give a patrol cycle number (the page's 'Older runs' link does)"
        )
    cycle = int(before) if before else None
    seen = being_overview.overview(engram_of(request).views, found.id, before=cycle, per_page=RUNS_PER_PAGE)
    return page(
        request,
        "being.html",
        viewer,
        being=found,
        o=seen,
        histogram=plots.importance_histogram(seen.histogram),
        changes=plots.series_plot(seen.changes, list(being_overview.CHANGES)),
    )
