"""The log page (`/ui/log`, admin tokens only): the global event log a page at a time, filtered by
being, aggregate, event type and time, and following new events live.

Admin only: a being token's view of the log would have to skip every other being's events, and a
being with few events among many would make each page read far; the being's own history is on its
item pages. Each request reads a bounded slice of the log (`services/log_view.py`).

The live part is a `data-live` block polling `/ui/log/live?after=N` (the newest position the page
showed, with the page's filters): it lists what came after it, up to a page, until the reader
moves on.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from fastapi import Request, Response
from fastapi.responses import HTMLResponse

from engram.adapters.ui.fields import whole_number
from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, engram_of, require_admin, ui_router
from engram.adapters.ui.session import Viewer
from engram.domain.errors import InvalidInput
from engram.services.log_view import MAX_PAGE, LogFilter, LogPage, log_page, parse_instant

PAGE = 50
LIVE_PAGE = 100
MAX_PAYLOAD_CHARS = 4_000
FIELDS = ("being", "aggregate", "type", "since", "until")


def _filter(params: dict[str, str]) -> LogFilter:
    return LogFilter(
        being=params.get("being") or None,
        aggregate=params.get("aggregate") or None,
        type=params.get("type") or None,
        since=parse_instant(params.get("since"), "since"),
        until=parse_instant(params.get("until"), "until"),
    )


def _rows(found: LogPage) -> list[dict[str, Any]]:
    rows = []
    for entry in found.entries:
        payload = json.dumps(entry["payload"], indent=1, sort_keys=True, default=str, ensure_ascii=False)
        if len(payload) > MAX_PAYLOAD_CHARS:
            payload = payload[:MAX_PAYLOAD_CHARS] + "\n…"
        rows.append({**entry, "payload_text": payload})
    return rows


def _query(params: dict[str, str], **changes: Any) -> str:
    kept = {k: params[k] for k in FIELDS if params.get(k)}
    kept.update({k: str(v) for k, v in changes.items()})
    return urlencode(kept)


def _read(request: Request, viewer: Viewer, params: dict[str, str], limit: int) -> LogPage:
    require_admin(viewer)
    return log_page(
        engram_of(request).audit, _filter(params), after=whole_number(params, "after", 0), limit=limit
    )


@ui_router.get("/log", response_class=HTMLResponse)
def log_view(request: Request, viewer: ViewerDep) -> Response:
    params = dict(request.query_params)
    require_admin(viewer)
    try:
        limit = whole_number(params, "limit", PAGE, high=MAX_PAGE) or PAGE
        if "after" not in params:  # opening the page: the newest events (with filters: from the start)
            filtered = any(params.get(k) for k in FIELDS)
            params["after"] = "0" if filtered else str(max(0, engram_of(request).store.head() - limit))
        found = _read(request, viewer, params, limit)
    except InvalidInput as exc:
        return page(
            request, "log.html", viewer, status=422, error=exc.message, params=params, rows=[], found=None
        )
    return page(
        request,
        "log.html",
        viewer,
        error="",
        params=params,
        rows=_rows(found),
        found=found,
        next_query=_query(params, after=found.scanned_to, limit=limit) if found.more else None,
        newest_query=_query(params, after=max(0, found.head - limit), limit=limit),
        first_query=_query(params, after=0, limit=limit),
        live_query=_query(params, after=found.scanned_to),
        following=not found.more,
    )


@ui_router.get("/log/live", response_class=HTMLResponse)
def log_live(request: Request, viewer: ViewerDep) -> Response:
    """What came after `after`: the log page's live block reloads this every two seconds."""
    params = dict(request.query_params)
    found = _read(request, viewer, params, LIVE_PAGE)
    return page(request, "log_live.html", viewer, rows=_rows(found), found=found)
