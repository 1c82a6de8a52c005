"""Jinja2 for the explorer's pages: templates shipped in the package, every value escaped."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from engram.adapters.ui.session import CSRF_FIELD, Viewer, csrf_token

_env = Environment(
    loader=PackageLoader("engram.adapters.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,  # a misspelt name fails the test that renders it, not silently blank
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: Any) -> str:
    """An instant as people read it: `2026-11-27 20:15:03 UTC` (seconds; the page's title has it all)."""
    if value is None or value == "":
        return "—"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    text = str(value)
    return text[:19].replace("T", " ") + (" UTC" if len(text) >= 19 else "")


def _short(value: Any, length: int = 8) -> str:
    return str(value)[:length]


_env.filters["when"] = _when
_env.filters["short"] = _short


def environment() -> Environment:
    return _env


def page(
    request: Request, template: str, viewer: Viewer | None, *, status: int = 200, **context: Any
) -> HTMLResponse:
    """A whole page or, for a request of the page's own script (`X-Fragment: 1`), the same template's
    `content` block only — the live parts reload themselves this way."""
    values = {
        "request": request,
        "viewer": viewer,
        "csrf_field": CSRF_FIELD,
        "csrf": csrf_token(request, viewer) if viewer is not None else "",
        **context,
    }
    tmpl = _env.get_template(template)
    if request.headers.get("x-fragment") == "1" and "content" in tmpl.blocks:
        ctx = tmpl.new_context(values)
        html = "".join(tmpl.blocks["content"](ctx))
    else:
        html = tmpl.render(values)
    response = HTMLResponse(html, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    # No inline script anywhere: a `<script>` planted in memory text could not run even if it escaped.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'"
    )
    return response
