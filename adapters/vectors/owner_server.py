"""The owner's side of the link: a Unix socket (mode 0600) that serves the vector index to the other
processes of the data directory, one thread per connection.

A thread per connection, so a call that takes long (an HNSW build, a minute at 100k points; it runs in
a child process and leaves the GIL free) holds up only its own caller. Nothing is unpickled from a
connection before it passed the challenge of the shared key (`owner_link.py`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import threading
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any

import structlog

from engram.adapters.vectors.owner_link import GONE, PING, TIMEOUT_S, OwnerGone, set_io_timeout
from engram.adapters.vectors.ownership import Holder

log = structlog.get_logger(__name__)

Handler = Callable[[str, tuple[Any, ...], Mapping[str, Any]], Any]

# How long a stalled caller may keep a thread of the owner writing its answer.
_SEND_TIMEOUT_S = 30.0


class OwnerServer:
    """Serves `handle(method, args, kwargs)` at `address` to callers that know `key`; a ping answers
    `identity`."""

    def __init__(self, identity: Holder, key: bytes, handle: Handler) -> None:
        self.identity = identity
        self.address = identity.address
        self._key = key
        self._handle = handle
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._mutex = threading.Condition()
        self._busy: dict[socket.socket, bool] = {}  # each connection: answering a call now?
        self._stopping = False

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.address)  # left by an owner that died; the owner lock says none runs
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.address)
            os.chmod(self.address, 0o600)
            listener.listen(64)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, name="vector-owner-accept", daemon=True)
        self._accepting.start()

    def stop(self, grace: float) -> None:
        """Stop accepting, let the calls in flight finish (for up to `grace` seconds), end the rest.
        Callers on an idle connection find it closed and look for the next owner."""
        with self._mutex:
            self._stopping = True
            idle = [sock for sock, busy in self._busy.items() if not busy]
        listener = self._listener
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
        for sock in idle:
            _shut(sock)
        deadline = time.monotonic() + grace
        with self._mutex:
            self._mutex.wait_for(lambda: not self._busy, max(0.0, deadline - time.monotonic()))
            left = list(self._busy)
        for sock in left:
            _shut(sock)
        if self._accepting is not None:
            self._accepting.join(timeout=1)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # stop() shut the listener
            with self._mutex:
                if self._stopping:
                    sock.close()
                    return
                self._busy[sock] = False
            threading.Thread(
                target=self._serve, args=(sock,), name="vector-owner-connection", daemon=True
            ).start()

    def _serve(self, sock: socket.socket) -> None:
        conn = Connection(os.dup(sock.fileno()))  # the socket stays ours, to shut it from stop()
        try:
            set_io_timeout(sock, TIMEOUT_S)
            deliver_challenge(conn, self._key)
            answer_challenge(conn, self._key)
            # Idle connections wait for their next call as long as they like.
            set_io_timeout(sock, 0, send=_SEND_TIMEOUT_S)
            while True:
                try:
                    method, args, kwargs = conn.recv()
                except (EOFError, OSError):
                    return
                with self._mutex:
                    self._busy[sock] = True
                _send(conn, self._answer(method, args, kwargs))
                with self._mutex:
                    self._busy[sock] = False
                    if self._stopping:
                        return
        except Exception as exc:  # a caller that failed the challenge or went away mid-call
            log.debug("vector_owner_connection_ended", reason=f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
            sock.close()
            with self._mutex:
                self._busy.pop(sock, None)
                self._mutex.notify_all()

    def _answer(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, Any]:
        if method == PING:
            return (GONE, None) if self._stopping else ("ok", self.identity)
        try:
            return ("ok", self._handle(method, args, kwargs))
        except OwnerGone:
            return (GONE, None)
        except Exception as exc:
            return ("error", exc)


def _send(conn: Connection, answer: tuple[str, Any]) -> None:
    status, value = answer
    if status == "error":
        # An exception the caller could not rebuild (one whose __init__ wants more than its args) would
        # leave it with a bare unpickling error: try here, on what this process pickled itself.
        try:
            pickle.loads(pickle.dumps(value))  # noqa: S301
        except Exception:
            answer = ("error", RuntimeError(f"{type(value).__name__}: {value}"))
    conn.send(answer)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
