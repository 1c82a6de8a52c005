"""Qdrant Edge shared by the processes of one data directory (ADR 0036).

Edge opens a shard in one process only. The first process that needs the index takes the owner lock
(`ownership.py`), opens Edge and serves the `VectorIndex` port on a Unix socket (`owner_server.py`);
every other process forwards each call to it (`owner_link.py`). So `engram serve`, `engram worker`,
`engram mcp` and any number of CLI commands work on one data directory at once.

- The owner keeps the index until its `close()` (a long-running process: as long as it runs; a CLI
  command: until it ends), or until it dies, when the operating system releases its lock.
- A call that finds the owner gone (it exited, or was killed with the call in flight) looks for the
  next one: it takes the lock itself and opens Edge, or connects to whichever process took it, and
  sends the call again. Every call of the port may be sent twice: writes are idempotent and monotonic
  by log position, reads have no effect. After `_ATTEMPTS` owners in a row went away it fails with a
  retryable `ServiceUnavailable` (HTTP 503): the worker retries the batch after its backoff.
- An owner that holds the lock but does not answer (stopped, hung) is named in one line
  (`VectorIndexBusy`) after at most a few seconds: pid, role, since when, and what to do.
- Each call runs with the owner's settings (search threads, HNSW breadth, indexing threshold);
  being scoping stays an argument of every search, forwarded as given.

The class is an `EdgeVectorIndex`: in the owner it is the engine itself (its state is set up when the
process becomes the owner), elsewhere each method forwards.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast
from uuid import UUID

import structlog

from engram.adapters.vectors.edge import ALIASES_FILE, DISK_RESERVE_BYTES, EdgeVectorIndex
from engram.adapters.vectors.owner_link import (
    TIMEOUT_S,
    OwnerClient,
    OwnerGone,
    OwnerUnresponsive,
    PackedPoints,
)
from engram.adapters.vectors.owner_server import OwnerServer
from engram.adapters.vectors.ownership import (
    Holder,
    OwnerLock,
    current_role,
    new_holder,
    shared_key,
    socket_address,
    unresponsive_message,
)
from engram.projections.vector_index import (
    IndexStats,
    PayloadPatch,
    PayloadUpdate,
    ScoredPoint,
    SearchFilter,
    ServiceUnavailable,
    Vector,
    VectorIndexBusy,
    VectorPoint,
)
from engram.projections.vectors import DRAIN_TIMEOUT_S, Searches

log = structlog.get_logger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_ATTEMPTS = 3
_CLOSE_GRACE_S = 10.0  # how long a closing owner lets other processes' calls in flight finish
_PORT_METHODS = frozenset(
    {
        "ensure_collection",
        "drop_collection",
        "collection_exists",
        "list_collections",
        "upsert",
        "set_payloads",
        "patch_payloads",
        "delete",
        "search",
        "retrieve",
        "count",
        "set_alias",
        "resolve_alias",
        "index_stats",
        "optimize",
    }
)
# Calls that use a shard: a drop in the owner, asked for by any process, waits for those begun before
# it, whichever process asked for them (the vectors view waits for its own process's searches too).
_SHARD_READS = frozenset({"search", "retrieve", "count", "index_stats"})


class SharedEdgeVectorIndex(EdgeVectorIndex):
    """`EdgeVectorIndex` under `root`, owned by one process of the data directory and reached by the
    others through it. Thread-safe."""

    def __init__(
        self,
        root: Path,
        *,
        indexing_threshold_kb: int | None = None,
        hnsw_ef: int | None = None,
        search_threads: int | None = 1,
        disk_reserve_bytes: int = DISK_RESERVE_BYTES,
    ) -> None:
        # The engine's own state is set up only if this process becomes the owner (`_become_owner`).
        self._shared_root = Path(root)
        self._options: dict[str, Any] = {
            "indexing_threshold_kb": indexing_threshold_kb,
            "hnsw_ef": hnsw_ef,
            "search_threads": search_threads,
            "disk_reserve_bytes": disk_reserve_bytes,
        }
        self._owner_lock = OwnerLock(self._shared_root)
        self._shard_calls = Searches()  # the owner's calls that use a shard, from any process
        self._deciding = threading.Lock()
        self._owning = False
        self._link: OwnerClient | None = None
        self._server: OwnerServer | None = None
        self._waiter: threading.Thread | None = None
        self._failed: tuple[float, VectorIndexBusy] | None = None  # when the last search for an owner failed
        self._shut = False
        self.last_optimize = {}
        # What `EdgeVectorIndex.resolve_alias` reads, so that every process resolves aliases itself
        # (`_become_owner` sets the same up again in the owner).
        self._lock = threading.RLock()
        self._aliases_path = self._shared_root / ALIASES_FILE
        self._aliases: dict[str, str] = {}
        self._aliases_stamp: tuple[int, int, int] | None = None

    @property
    def owns(self) -> bool:
        """Whether this process owns the index now (False until the first call decides)."""
        return self._owning

    def hold(self) -> None:
        """For a long-running process (`engram serve`, `worker`, `mcp`): own the index now if nobody
        does, else reach it through its owner now and take it over as soon as that owner lets go
        (a CLI command ends, a process dies), rather than at the next call."""
        if self._owner_link() is None:
            return
        with self._deciding:
            if self._waiter is None and not self._shut:
                self._waiter = threading.Thread(
                    target=self._wait_to_own, name="vector-owner-wait", daemon=True
                )
                self._waiter.start()

    # -- the port ----------------------------------------------------------------------------

    def ensure_collection(self, name: str, dim: int) -> None:
        self._route(EdgeVectorIndex.ensure_collection, name, dim)

    def drop_collection(self, name: str) -> None:
        self._route(EdgeVectorIndex.drop_collection, name)

    def collection_exists(self, name: str) -> bool:
        return self._route(EdgeVectorIndex.collection_exists, name)

    def list_collections(self) -> list[str]:
        return self._route(EdgeVectorIndex.list_collections)

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        self._route(EdgeVectorIndex.upsert, collection, points)

    def set_payloads(self, collection: str, updates: Sequence[PayloadUpdate]) -> None:
        self._route(EdgeVectorIndex.set_payloads, collection, updates)

    def patch_payloads(self, collection: str, patches: Sequence[PayloadPatch]) -> None:
        self._route(EdgeVectorIndex.patch_payloads, collection, patches)

    def delete(self, collection: str, ids: Sequence[UUID]) -> None:
        self._route(EdgeVectorIndex.delete, collection, ids)

    def search(
        self,
        collection: str,
        being_id: UUID,
        vector: Vector,
        limit: int,
        *,
        where: SearchFilter | None = None,
        score_threshold: float | None = None,
        with_vectors: bool = False,
        with_payload: bool = True,
    ) -> list[ScoredPoint]:
        return self._route(
            EdgeVectorIndex.search,
            collection,
            being_id,
            vector,
            limit,
            where=where,
            score_threshold=score_threshold,
            with_vectors=with_vectors,
            with_payload=with_payload,
        )

    def retrieve(
        self, collection: str, being_id: UUID, ids: Sequence[UUID], *, with_vectors: bool = False
    ) -> list[ScoredPoint]:
        return self._route(EdgeVectorIndex.retrieve, collection, being_id, ids, with_vectors=with_vectors)

    def count(self, collection: str, being_id: UUID | None = None) -> int:
        return self._route(EdgeVectorIndex.count, collection, being_id)

    def set_alias(self, alias: str, collection: str) -> None:
        self._route(EdgeVectorIndex.set_alias, alias, collection)

    def resolve_alias(self, alias: str) -> str | None:
        # Read here, not asked of the owner: aliases.json, which the owner replaces atomically, is what
        # the owner reads too, and a search resolves its alias first (one round trip fewer).
        return EdgeVectorIndex.resolve_alias(self, alias)

    def index_stats(self, collection: str) -> IndexStats:
        return self._route(EdgeVectorIndex.index_stats, collection)

    def optimize(self, collection: str) -> None:
        self._route(EdgeVectorIndex.optimize, collection)

    def close(self) -> None:
        """Close the link, or, in the owner, stop serving (calls in flight finish first), close Edge
        and release the lock: the next process that needs the index takes it over."""
        with self._deciding:
            if self._shut:
                return
            self._shut = True
            link, self._link = self._link, None
            owning, server = self._owning, self._server
        if link is not None:
            link.close()
        if not owning:
            return
        try:
            if server is not None:
                server.stop(_CLOSE_GRACE_S)
            EdgeVectorIndex.close(self)
        finally:
            self._owning = False
            self._owner_lock.release()
            log.info("vector_index_released", root=str(self._shared_root), role=current_role())

    # -- routing -----------------------------------------------------------------------------

    def _route(
        self, method: Callable[Concatenate[EdgeVectorIndex, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `method` here if this process owns the index, else on the owner."""
        for _ in range(_ATTEMPTS):
            link = self._owner_link()
            if link is None:
                return self._run_here(method, *args, **kwargs)
            try:
                return cast(T, link.call(method.__name__, args, kwargs))
            except OwnerGone:
                self._forget(link)
            except OwnerUnresponsive:
                self._forget(link)
                raise VectorIndexBusy(
                    unresponsive_message(self._shared_root, link.holder), holder=link.holder.pid
                ) from None
        raise ServiceUnavailable(
            f"the owner of the embedded vector index under {self._shared_root} went away {_ATTEMPTS} "
            "times during one call; retry"
        )

    def _owner_link(self) -> OwnerClient | None:
        """None when this process owns the index, else the link to the process that does."""
        if self._owning:
            return None
        link = self._link
        if link is not None:
            return link
        asked = time.monotonic()
        with self._deciding:
            if self._shut:
                raise RuntimeError("the vector index is closed")
            if self._owning or self._link is not None:
                return self._link
            failed = self._failed
            if failed is not None and failed[0] >= asked:
                # Another thread looked for the owner while this one waited, and found none that
                # answers: say so now rather than look (and wait) again, thread after thread.
                raise VectorIndexBusy(failed[1].message, **failed[1].details)
            try:
                self._link = self._find_owner()
            except VectorIndexBusy as exc:
                self._failed = (time.monotonic(), exc)
                raise
            return self._link

    def _find_owner(self) -> OwnerClient | None:
        """Take the index over if nobody holds it (None), else connect to its owner. An owner that
        refuses connections is waited for: one that has just taken the lock listens within moments,
        one that is closing lets the lock go once its calls in flight are done."""
        deadline = time.monotonic() + TIMEOUT_S + _CLOSE_GRACE_S
        delay = 0.005
        holder: Holder | None = None
        while True:
            # `held`: this process's `hold()` thread has just taken the lock and waits for `_deciding`.
            if self._owner_lock.held or self._owner_lock.try_acquire():
                self._become_owner()
                return None
            holder = self._owner_lock.holder()
            if holder is not None:
                try:
                    link = OwnerClient.connect(holder.address, shared_key(self._shared_root))
                except OwnerGone:
                    pass  # it died or closed, or the next owner does not listen yet
                except OwnerUnresponsive:
                    break
                else:
                    log.info(
                        "vector_index_reached_through_owner",
                        root=str(self._shared_root),
                        owner_pid=link.holder.pid,
                        owner_role=link.holder.role,
                    )
                    return link
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        raise VectorIndexBusy(
            unresponsive_message(self._shared_root, holder), holder=holder.pid if holder else None
        )

    def _wait_to_own(self) -> None:
        """The `hold()` thread: wait for the owner lock, then take the index over."""
        try:
            if not self._owner_lock.wait_acquire():
                return
            with self._deciding:
                if self._shut:
                    self._owner_lock.release()
                    return
                if self._owning:  # a call found the lock taken here first and took the index over
                    return
                link, self._link = self._link, None
                self._become_owner()
            if link is not None:
                link.close()  # calls still on it find it closed and come back here
        except Exception:
            log.error("taking the vector index over failed", root=str(self._shared_root), exc_info=True)

    def _become_owner(self) -> None:
        """With the owner lock taken: open Edge, listen, say so in the lock file."""
        try:
            EdgeVectorIndex.__init__(self, self._shared_root, **self._options)
            server = OwnerServer(
                new_holder(socket_address(self._shared_root)), shared_key(self._shared_root), self._serve_call
            )
            try:
                server.start()
            except BaseException:
                EdgeVectorIndex.close(self)
                raise
        except BaseException:
            self._owner_lock.release()
            raise
        self._server = server
        self._owner_lock.publish(server.identity)
        self._owning = True
        log.info(
            "vector_index_owned", root=str(self._shared_root), role=current_role(), address=server.address
        )

    def _forget(self, link: OwnerClient) -> None:
        with self._deciding:
            if self._link is link:
                self._link = None
        link.close()

    def _serve_call(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """A call from another process, run here as the owner."""
        if method not in _PORT_METHODS:
            raise ValueError(f"{method!r} is not a method of the vector index")
        if self._shut:
            raise OwnerGone("this owner is closing")
        if method == "upsert" and isinstance(args[1], PackedPoints):
            args = (args[0], args[1].points())
        try:
            return self._run_here(getattr(EdgeVectorIndex, method), *args, **kwargs)
        except RuntimeError:
            if self._shut:  # closed under the call: the caller tries the next owner
                raise OwnerGone("this owner closed") from None
            raise

    def _run_here(
        self, method: Callable[Concatenate[EdgeVectorIndex, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `method` on the engine this process owns; a drop waits for the shard calls begun before."""
        if method.__name__ == "drop_collection":
            self._shard_calls.drain(DRAIN_TIMEOUT_S)
        with self._shard_calls.running() if method.__name__ in _SHARD_READS else contextlib.nullcontext():
            return method(self, *args, **kwargs)


def hold_vector_index(index: object) -> None:
    """`SharedEdgeVectorIndex.hold()` for a long-running process's index; other adapters need nothing."""
    if isinstance(index, SharedEdgeVectorIndex):
        index.hold()
