"""structlog setup: console or JSON lines on stderr, with contextvars (being, command, correlation id)."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = ("api_key", "key", "token", "password", "authorization", "secret")


def _drop_secrets(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # Defence in depth: adapters never log secrets, and anything named like one is masked anyway.
    for k in list(event_dict):
        if any(s == k.lower() or k.lower().endswith("_" + s) for s in _SECRET_KEYS):
            event_dict[k] = "***"
    return event_dict


def _identity(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    return event_dict


def configure_logging(level: str = "warning", fmt: str = "console") -> None:
    # Plain tracebacks only: rich's pretty tracebacks print local variables, which may hold secrets.
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _drop_secrets,
            structlog.processors.format_exc_info if fmt == "json" else _identity,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
