"""The memory explorer: server-rendered pages at `/ui` over the same services as the HTTP API (ADR 0084)."""

from engram.adapters.ui import (  # noqa: F401  (their routes join ui_router)
    admin_pages,
    being_pages,
    item_pages,
    log_pages,
    search_pages,
)
from engram.adapters.ui.routes import ui_router

__all__ = ["ui_router"]
