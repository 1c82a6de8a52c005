"""structlog setup: console or JSON lines on stderr, with contextvars (being, command, correlation id).

Every line reaches stderr in one write. `print()` writes a message and its newline separately, so a
line from another thread (uvicorn's "Started server process", say) could land between the two and
leave a JSON line that no log shipper can parse; structlog's `WriteLogger` writes `message + "\n"`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping, Sequence
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


def configure_logging(
    level: str = "warning", fmt: str = "console", *, library_loggers: Sequence[str] = ()
) -> None:
    """Engram's own log lines; `library_loggers` are stdlib loggers (e.g. "uvicorn") rendered alike.

    Only the loggers named are touched, never the root logger: an application that embeds Engram
    keeps its own logging setup.
    """
    # Plain tracebacks only: rich's pretty tracebacks print local variables, which may hold secrets.
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _drop_secrets,
        structlog.processors.format_exc_info if fmt == "json" else _identity,
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    if library_loggers:
        # A stdlib StreamHandler also writes `message + terminator` at once, so its lines and
        # structlog's never share a line; in JSON mode every line on stderr is then JSON.
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            )
        )
        for name in library_loggers:
            library = logging.getLogger(name)
            library.handlers = [handler]
            library.propagate = False
