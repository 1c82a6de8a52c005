"""PostgreSQL's LISTEN/NOTIFY on the log's channel: what wakes the worker when a process writes."""

from __future__ import annotations

import threading

import psycopg
import structlog
from psycopg import sql

from engram.services.ports import Listen, Waker

log = structlog.get_logger("engram.worker")


def postgres_listener(conninfo: str, channel: str, *, safety_pull_s: float) -> Listen:
    """LISTEN on `channel` and wake the loops; reconnect on failure. Without a notification the loops
    are woken anyway every `safety_pull_s`: a lost notification must never stall a projection (the
    library's issue #305)."""

    def listen(wakeup: Waker, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=safety_pull_s, stop_after=1):
                            wakeup.notify()
                        # Safety pull: wake the loops even without a notification.
                        wakeup.notify()
            except Exception:
                log.warning("LISTEN connection lost; reconnecting", exc_info=True)
                stop.wait(1.0)

    return listen
