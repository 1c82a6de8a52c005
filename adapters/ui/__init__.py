"""The memory explorer: server-rendered pages at `/ui` over the same services as the HTTP API (ADR 0084)."""

from engram.adapters.ui import (
    being_pages,  # noqa: F401  (its routes join ui_router)
    item_pages,  # noqa: F401  (its routes join ui_router)
)
from engram.adapters.ui.routes import ui_router

__all__ = ["ui_router"]
