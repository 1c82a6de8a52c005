"""The link between a process and the owner of the embedded vector index: one Unix socket per call in
flight, `multiprocessing.connection` messages over it.

A connection first runs `multiprocessing.connection`'s mutual challenge with the shared key (HMAC;
nothing is unpickled before it passed), then carries requests `(method, args, kwargs)` and answers
`("ok", value)` or `("error", exception)`. Every wait is bounded: connecting and the challenge by
`TIMEOUT_S` (a stopped owner still accepts connections, the kernel does that, but never answers);
a call whose answer takes longer is not cut short (an HNSW build takes a minute), but every
`TIMEOUT_S` of silence the client checks on a fresh connection that the owner still answers.

Upserts travel packed: the ids as one byte string, the vectors as one float32 matrix, in messages of
at most `UPSERT_MESSAGE_BYTES` of vectors, rather than one pickled numpy array per point.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any
from uuid import UUID

import numpy as np

from engram.adapters.vectors._common import latest_per_id
from engram.adapters.vectors.ownership import Holder
from engram.projections.vector_index import Vector, VectorPoint

TIMEOUT_S = 5.0
UPSERT_MESSAGE_BYTES = 4 << 20
_IDLE_CONNECTIONS = 8
PING = "ping"
GONE = "gone"  # the answer of an owner that is closing: try the next one


class OwnerGone(Exception):
    """The owner is not there any more (it exited or was killed); the call may be retried elsewhere."""


class OwnerUnresponsive(Exception):
    """The owner holds the index but does not answer (stopped, hung)."""


def set_io_timeout(sock: socket.socket, seconds: float, *, send: float | None = None) -> None:
    """Bound each blocking read on `sock`, and each write (by `send` if given), 0 meaning unbounded.
    Kernel timeouts, so they also hold for a `Connection` over a duplicate of the socket's descriptor."""
    for option, value in (
        (socket.SO_RCVTIMEO, seconds),
        (socket.SO_SNDTIMEO, seconds if send is None else send),
    ):
        whole = int(value)
        sock.setsockopt(socket.SOL_SOCKET, option, struct.pack("ll", whole, int((value - whole) * 1_000_000)))


def connect(address: str, key: bytes) -> Connection:
    """A connection to the owner listening at `address`, past the mutual challenge."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT_S)
        sock.connect(address)
        sock.settimeout(None)
        set_io_timeout(sock, TIMEOUT_S)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise OwnerGone(f"nothing listens at {address}") from exc
    except TimeoutError as exc:  # the listen queue of a stopped owner is full
        sock.close()
        raise OwnerUnresponsive(f"{address} accepts no connection") from exc
    except BaseException:
        sock.close()
        raise
    conn = Connection(sock.detach())
    try:
        answer_challenge(conn, key)
        deliver_challenge(conn, key)
    except BaseException as exc:
        conn.close()
        error = _link_error(exc, address)
        if error is exc:
            raise
        raise error from exc
    return conn


def _link_error(exc: BaseException, address: str) -> BaseException:
    """What a failed read or write on a link means: a silent owner, a gone one, or something else."""
    if isinstance(exc, BlockingIOError | TimeoutError):  # SO_RCVTIMEO / SO_SNDTIMEO ran out
        return OwnerUnresponsive(f"the owner at {address} did not answer within {TIMEOUT_S:.0f} s")
    if isinstance(exc, EOFError | ConnectionError):
        return OwnerGone(f"the owner at {address} closed the connection")
    if isinstance(exc, AuthenticationError):
        return RuntimeError(
            f"the owner of the vector index at {address} does not share this process's key "
            f"(owner.key changed?): {exc}"
        )
    return exc


def ping(conn: Connection, address: str) -> Holder:
    """Who the owner at the other end of `conn` is; raises `OwnerUnresponsive` if it does not say
    within `TIMEOUT_S`."""
    try:
        conn.send((PING, (), {}))
        if not conn.poll(TIMEOUT_S):
            raise OwnerUnresponsive(f"the owner at {address} did not answer a ping")
        status, holder = conn.recv()
    except OwnerUnresponsive:
        raise
    except BaseException as exc:
        error = _link_error(exc, address)
        if error is exc:
            raise
        raise error from exc
    if status == GONE:
        raise OwnerGone(f"the owner at {address} is closing")
    if not isinstance(holder, Holder):
        raise RuntimeError(f"the owner at {address} answered a ping with {holder!r}")
    return holder


@dataclass(frozen=True, slots=True)
class PackedPoints:
    """Points to upsert as three arrays rather than one object per point."""

    ids: bytes  # 16 bytes per point
    vectors: Vector  # (points, dim)
    payloads: list[Mapping[str, Any]]

    @classmethod
    def of(cls, points: Sequence[VectorPoint]) -> PackedPoints | Sequence[VectorPoint]:
        """Packed, or the points as given when their vectors are not all 1-D of one length (the
        engine then refuses them with its own message)."""
        vectors = [np.asarray(p.vector, dtype=np.float32) for p in points]
        if not vectors or any(v.ndim != 1 or v.shape != vectors[0].shape for v in vectors):
            return points
        return cls(
            ids=b"".join(p.id.bytes for p in points),
            vectors=np.stack(vectors),
            payloads=[dict(p.payload) for p in points],
        )

    def points(self) -> list[VectorPoint]:
        ids = self.ids
        return [
            VectorPoint(id=UUID(bytes=ids[16 * i : 16 * i + 16]), vector=vector, payload=payload)
            for i, (vector, payload) in enumerate(zip(self.vectors, self.payloads, strict=True))
        ]


def upsert_messages(points: Sequence[VectorPoint]) -> Iterator[PackedPoints | Sequence[VectorPoint]]:
    """An upsert's points in messages of bounded size, each point once with its latest state.

    Checked and reduced before anything is sent, as the engine would do for the whole batch: a bad
    point writes nothing, and messages applied in order end where the whole batch would.
    """
    latest = latest_per_id(points)
    if not latest:
        return
    dim = max(1, int(np.asarray(latest[0].vector).size))
    step = max(1, UPSERT_MESSAGE_BYTES // (4 * dim))
    for start in range(0, len(latest), step):
        yield PackedPoints.of(latest[start : start + step])


class OwnerClient:
    """Calls on the owner `holder`, from any thread: each call in flight has a connection of its own
    (the owner serves each connection on a thread of its own); idle ones are kept for the next calls."""

    def __init__(self, holder: Holder, key: bytes, first: Connection) -> None:
        self.holder = holder
        self._key = key
        self._idle = [first]
        self._mutex = threading.Lock()
        self._closed = False

    @classmethod
    def connect(cls, address: str, key: bytes) -> OwnerClient:
        """A link to the owner listening at `address`, which says who it is (its lock file may still
        name the owner before it, for a moment after a hand-over)."""
        conn = connect(address, key)
        try:
            holder = ping(conn, address)
        except BaseException:
            conn.close()
            raise
        return cls(holder, key, conn)

    def call(self, method: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if method == "upsert":
            collection, points = args
            for message in upsert_messages(points):
                self._request((method, (collection, message), {}))
            return None
        return self._request((method, tuple(args), dict(kwargs)))

    def _request(self, message: tuple[str, tuple[Any, ...], dict[str, Any]]) -> Any:
        conn = self._take()
        try:
            conn.send(message)
            while not conn.poll(TIMEOUT_S):
                self._probe()
            status, value = conn.recv()
        except BaseException as exc:
            conn.close()
            error = _link_error(exc, self.holder.address)
            if error is exc:
                raise
            raise error from exc
        self._give(conn)
        if status == "error":
            raise value
        if status == GONE:
            raise OwnerGone(f"the owner at {self.holder.address} is closing")
        return value

    def _probe(self) -> None:
        """A call has had no answer for a while: check on a connection of its own that the owner
        still answers (raises `OwnerUnresponsive` if not). One that has gone is not an error here:
        the call's own connection then ends, or it stopped listening but finishes the calls in flight."""
        try:
            conn = connect(self.holder.address, self._key)
        except OwnerGone:
            return
        try:
            ping(conn, self.holder.address)
        except OwnerGone:
            conn.close()
            return
        except BaseException:
            conn.close()
            raise
        self._give(conn)

    def _take(self) -> Connection:
        with self._mutex:
            if self._closed:
                raise OwnerGone("the link to the owner is closed")
            if self._idle:
                return self._idle.pop()
        return connect(self.holder.address, self._key)

    def _give(self, conn: Connection) -> None:
        with self._mutex:
            if not self._closed and len(self._idle) < _IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
