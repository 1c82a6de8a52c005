"""`engram worker`: keeps every view caught up with the log, continuously.

One thread per projection. Each holds its projection's lock for as long as it runs, so two
workers of one deployment never process the same projection at once (the second waits for the
lock). A failed batch rolls back, is logged with its reason, recorded in the view's status, and
retried with exponential backoff; the other projections keep going.

New events are noticed by polling on SQLite, and by LISTEN/NOTIFY on PostgreSQL plus a periodic
safety pull, because a lost notification must never stall a projection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from projections import engine
from services.views import Views

log = structlog.get_logger("engram.worker")

MAX_BACKOFF_S = 30.0
SAFETY_PULL_S = 2.0


class Wakeup:
    """Shared by all loops: a notification (or the stop flag) ends every loop's wait early."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        with self._cond:
            if self._generation == seen:
                self._cond.wait(timeout)
            return self._generation

    @property
    def generation(self) -> int:
        return self._generation


class Worker:
    def __init__(
        self,
        views: Views,
        *,
        names: Iterable[str] | None = None,
        poll_interval: float = 0.2,
        listen: Callable[[Wakeup, threading.Event], None] | None = None,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self.views = views
        self.names = list(names or views.names())
        self.poll_interval = poll_interval
        self.listen = listen
        self.on_idle = on_idle
        self.stop_event = threading.Event()
        self.wakeup = Wakeup()
        self.threads: list[threading.Thread] = []
        self.stats: dict[str, dict[str, Any]] = {
            n: {"events": 0, "errors": 0, "restarts": 0} for n in self.names
        }

    def start(self) -> None:
        for name in self.names:
            t = threading.Thread(target=self._loop, args=(name,), name=f"projection-{name}", daemon=True)
            t.start()
            self.threads.append(t)
        if self.listen is not None:
            t = threading.Thread(
                target=self.listen, args=(self.wakeup, self.stop_event), name="listen", daemon=True
            )
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        self.stop_event.set()
        self.wakeup.notify()
        for t in self.threads:
            t.join(timeout=30)

    def run_forever(self) -> None:
        self.start()
        try:
            while not self.stop_event.wait(1.0):
                if self.on_idle is not None:
                    self.on_idle()
        finally:
            self.stop()

    def _acquire(self, name: str) -> Any:
        lock = self.views.lock(name)
        announced = False
        while not self.stop_event.is_set():
            if lock.try_acquire():
                log.info("projection lock acquired", projection=name)
                return lock
            if not announced:
                log.warning(
                    "projection is processed by another worker; waiting for its lock", projection=name
                )
                announced = True
            self.stop_event.wait(1.0)
        return None

    def _loop(self, name: str) -> None:
        lock = self._acquire(name)
        if lock is None:
            return
        db, projection = self.views.dbs[name], self.views.projections[name]
        backoff = 0.5
        seen = self.wakeup.generation
        failing = False
        try:
            while not self.stop_event.is_set():
                try:
                    count = engine.process(
                        db, projection, self.views.source, limit=self.views.settings.projection_batch_size
                    )
                except Exception as exc:
                    self.stats[name]["errors"] += 1
                    failing = True
                    reason = f"{type(exc).__name__}: {exc}"
                    log.error(
                        "projection failed; restarting after backoff",
                        projection=name,
                        reason=reason,
                        backoff_s=backoff,
                        exc_info=True,
                    )
                    try:
                        engine.record_error(db, projection, reason)
                    except Exception:  # the view database itself may be what failed
                        log.warning("could not record the error in the view", projection=name)
                    self.stop_event.wait(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    self.stats[name]["restarts"] += 1
                    continue
                if failing:
                    engine.record_error(db, projection, None)
                    log.info("projection recovered", projection=name)
                    failing = False
                backoff = 0.5
                self.stats[name]["events"] += count
                if count == 0:
                    seen = self.wakeup.wait(seen, self.poll_interval)
        finally:
            lock.release()


def postgres_listener(conninfo: str, channel: str) -> Callable[[Wakeup, threading.Event], None]:
    """LISTEN on the log's channel and wake the loops; reconnect on failure."""

    def listen(wakeup: Wakeup, stop: threading.Event) -> None:
        import psycopg
        from psycopg import sql

        while not stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=SAFETY_PULL_S, stop_after=1):
                            wakeup.notify()
                        # Safety pull: wake the loops even without a notification.
                        wakeup.notify()
            except Exception:
                log.warning("LISTEN connection lost; reconnecting", exc_info=True)
                stop.wait(1.0)

    return listen
