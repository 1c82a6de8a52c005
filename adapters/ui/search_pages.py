"""The search page (`/ui/beings/{being}/search`): query, recall and keyword search over one being's
memories, each hit's score broken down by its parts, and whether the read reactivated it.

Every search here is a POST with the page's CSRF token: recall and keyword search reactivate what they
find (and `query` does when asked), so a search changes the memory and must not be a link another
site could make a browser follow. The reads are the HTTP API's (`engram.reading`); the breakdown is
`Reading.query(explain=True)` (`services/score_parts.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from fastapi import Request, Response
from fastapi.responses import HTMLResponse

from engram.adapters.ui.fields import whole_number
from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, being_for, engram_of, ui_router
from engram.adapters.ui.session import Viewer, checked_form
from engram.domain.errors import InvalidInput
from engram.services.ranking import PROFILES
from engram.services.reading import MAX_QUERY_K, Explained, NodeView
from engram.services.score_parts import PARTS

KINDS = ("query", "recall", "search")
BAR_WIDTH = 240.0

WHAT_READS_DO = {
    "query": "Ranked retrieval by profile. It reactivates its hits only when “reactivate” is ticked.",
    "recall": "What a message brings back (up to 3, by meaning): every hit is reactivated (+1).",
    "search": "Keyword search, newest first: the first page reactivates every match (active +1, dead +2); "
    "further pages reactivate nothing.",
}


@dataclass
class Hit:
    node: NodeView
    parts: list[tuple[str, float]] = field(default_factory=list)
    bars: list[tuple[str, float, float]] = field(default_factory=list)
    """(part, x, width) of the positive parts, for the stacked bar."""
    reactivated: bool = False


@dataclass
class Results:
    kind: str
    hits: list[Hit]
    note: str
    total: int | None = None
    cursor: str | None = None


def _bars(hits: list[Hit]) -> None:
    """Each hit's positive parts as segments of one bar, on a scale shared by the page's hits."""
    top = max((sum(v for _, v in h.parts if v > 0) for h in hits), default=0.0)
    if top <= 0:
        return
    for hit in hits:
        x = 0.0
        for name, value in hit.parts:
            if value > 0:
                width = value / top * BAR_WIDTH
                hit.bars.append((name, round(x, 2), round(width, 2)))
                x += width


def _run(engram: Any, being: str, form: dict[str, str]) -> Results:
    kind = form.get("kind", "query")
    if kind not in KINDS:
        raise InvalidInput(f"kind is one of {', '.join(KINDS)}")
    text = form.get("q", "")
    if not text.strip():
        raise InvalidInput("type something to look for")
    reading = engram.reading
    if kind == "recall":
        recalled = reading.recall(being, text)
        hits = [Hit(n, [("semantic", n.score or 0.0)], reactivated=True) for n in recalled.nodes]
        return Results(kind, hits, WHAT_READS_DO["recall"])
    if kind == "search":
        cursor = form.get("cursor") or None
        found = reading.search_memory(
            being, text, form.get("mode", "or"), whole_number(form, "k", 20, 1, MAX_QUERY_K), cursor
        )
        first = cursor is None
        hits = [Hit(n, reactivated=first) for n in found.nodes]
        note = (
            f"This page reactivated all {found.reactivated} matches."
            if first
            else "A further page: nothing was reactivated."
        )
        return Results(kind, hits, note, total=found.total, cursor=found.cursor)
    reactivate = form.get("reactivate") == "on"
    queried = reading.query(
        being,
        text,
        whole_number(form, "k", 10, 1, MAX_QUERY_K),
        profile_name=form.get("profile", "default"),
        include_dead=form.get("include_dead") == "on",
        reactivate=reactivate,
        explain=True,
    )
    parts = queried.parts if isinstance(queried, Explained) else {}
    hits = [
        Hit(n, [(p, v) for p, v in parts.get(n.id, {}).items()], reactivated=reactivate)
        for n in queried.nodes
    ]
    _bars(hits)
    note = (
        "This query reactivated its hits."
        if reactivate
        else "Read only: this query reactivated nothing (tick “reactivate” to read as an agent does)."
    )
    return Results(kind, hits, note)


def _page(request: Request, viewer: Viewer, found: Any, form: dict[str, str], **extra: Any) -> HTMLResponse:
    return page(
        request,
        "search.html",
        viewer,
        being=found,
        form=form,
        kinds=KINDS,
        profiles=list(PROFILES),
        parts_order=PARTS,
        explained=WHAT_READS_DO,
        bar_width=int(BAR_WIDTH),
        **{"results": None, "error": "", **extra},
    )


@ui_router.get("/beings/{being}/search", response_class=HTMLResponse)
def search_form(request: Request, being: str, viewer: ViewerDep) -> Response:
    found = being_for(request, viewer, being)
    return _page(request, viewer, found, {"kind": "query", "q": "", "profile": "default", "k": "10"})


@ui_router.post("/beings/{being}/search", response_class=HTMLResponse)
async def run_search(request: Request, being: str, viewer: ViewerDep) -> Response:
    form = await checked_form(request, viewer)
    found = await anyio.to_thread.run_sync(being_for, request, viewer, being)
    engram = engram_of(request)
    try:
        results = await anyio.to_thread.run_sync(_run, engram, str(found.id), form)
    except InvalidInput as exc:
        return _page(request, viewer, found, form, error=exc.message, status=422)
    return _page(request, viewer, found, form, results=results)
