"""`VectorIndex` on Qdrant Edge (`qdrant-edge-py`): Qdrant's engine inside this process.

Layout under `root`:
- `collections/<name>/` one EdgeShard per collection (Edge allows one open shard per
  directory, so one process owns a collection at a time);
- `aliases.json` alias -> collection, replaced atomically; Edge has no aliases of its own;
- `aliases.lock` serialises read-modify-write of `aliases.json` between processes.

Monotonic writes are conditional upserts done by the engine (`upsert_points(condition=...)`):
an existing point is overwritten only if its stored `position` is <= the new one, a missing
point is inserted. Payload replacement (`overwrite_payload_by_filter`) and payload patches
(`set_payload_by_filter`) carry the same condition in the filter that selects their points, one
operation for all the points that get the same payload or patch. No read-before-write, so no race
between the read and the write.

Searches are exact (brute force over the being's points, driven by the payload index) until
`optimize()` builds HNSW; Edge never optimizes on its own. Edge's build holds the GIL for the whole
build (a minute at 100k x 384), so `optimize()` builds on a copy in a child process while this one
keeps serving and writing (ADR 0009):
- `optimizing/<name>/`: the copy the child optimizes; writes made meanwhile are journaled in memory
  and replayed onto it;
- `retired/<name>/`: the shard the optimized copy replaced, removed once the swap is done.
A crash at any step leaves either a complete original or a complete replacement, which the next
instance finds (`optimize.lock` tells whether an optimization is still running).

Edge keeps its segments and write-ahead log in memory-mapped files that grow as they fill: a write
into them on a full disk kills the process with SIGBUS, which no handler can catch. Every write
first checks that the disk keeps `disk_reserve_bytes` free (and more for a large write), and is
refused as `StorageFull` otherwise; an optimization first checks room for its copy (ADR 0030).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import structlog
from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    HasIdCondition,
    HnswIndexConfig,
    IntegerIndexParams,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Point,
    Query,
    QueryRequest,
    RangeFloat,
    SearchParams,
    UpdateOperation,
)

from engram.adapters.storage_full import MIB, DiskReserve, reported_as_storage_full
from engram.adapters.vectors._common import (
    CLUSTER_KEY,
    FULL_SCAN_THRESHOLD_KB,
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    HNSW_PAYLOAD_M,
    STATUS_KEY,
    as_uuid,
    as_vector,
    check_name,
    group_by_payload,
    group_by_position,
    latest_per_id,
    patch_payload,
    vector_list,
)
from engram.projections.vector_index import (
    BEING_KEY,
    POSITION_KEY,
    IndexStats,
    PayloadPatch,
    PayloadUpdate,
    ScoredPoint,
    SearchFilter,
    Vector,
    VectorIndexBusy,
    VectorPoint,
)
from engram.services.errors import StorageFull

log = structlog.get_logger(__name__)

_CONFIG_FILE = "edge_config.json"  # written by EdgeShard.create: its presence means "collection exists"
ALIASES_FILE = "aliases.json"
_ALIASES_LOCK = "aliases.lock"
_OPTIMIZING_DIR = "optimizing"
_RETIRED_DIR = "retired"
_OPTIMIZE_LOCK = "optimize.lock"

DISK_RESERVE_BYTES = 64 * MIB
"""Free space every write to the index must leave (`ENGRAM_VECTOR_DISK_RESERVE_MIB`): Edge grows
its write-ahead log in 32 MiB files and its storage in 32 MiB chunks, mapped in memory, whose pages
take disk space only as they are first written."""
NEW_SHARD_BYTES = 10 * MIB
"""What a new, empty collection takes on disk (measured: 9 MiB at 384 dimensions)."""
PAYLOAD_BYTES = 512
"""A point's payload and its share of the payload indexes and the log, estimated."""

# The child process of `optimize()`: only qdrant_edge, so it starts fast and needs no settings.
# Niced: on a small machine the request threads of the parent come first.
_OPTIMIZE_CHILD = """
import os, sys
os.nice(10)
from qdrant_edge import EdgeShard
shard = EdgeShard.load(sys.argv[1])
try:
    changed = shard.optimize()
    shard.flush()
finally:
    shard.close()
sys.stdout.write("changed" if changed else "unchanged")
"""


def _payload_indexes() -> dict[str, Any]:
    return {
        BEING_KEY: KeywordIndexParams(is_tenant=True),  # also builds the per-being HNSW graphs
        STATUS_KEY: KeywordIndexParams(enable_hnsw=False),
        CLUSTER_KEY: KeywordIndexParams(enable_hnsw=False),
        POSITION_KEY: IntegerIndexParams(lookup=True, range=True, enable_hnsw=False),
    }


def _not_newer_than(groups: Mapping[int, list[UUID]]) -> Filter:
    """Matches an existing point iff its stored position is <= the position written to it.

    Equal passes, so replaying a batch rewrites the same state (idempotent). One clause per
    distinct position: each id appears in exactly one clause, so the OR never lets a point
    through on another point's position.
    """
    return Filter(
        should=[
            Filter(
                must=[
                    HasIdCondition(set(ids)),
                    FieldCondition(POSITION_KEY, range=RangeFloat(lte=float(position))),
                ]
            )
            for position, ids in groups.items()
        ]
    )


def _being_filter(being_id: UUID, where: SearchFilter | None) -> Filter:
    must: list[Any] = [FieldCondition(BEING_KEY, match=MatchValue(str(being_id)))]
    must_not: list[Any] = []
    if where is not None:
        if where.statuses is not None:
            must.append(FieldCondition(STATUS_KEY, match=MatchAny(sorted(where.statuses))))
        if where.cluster_ids is not None:
            must.append(FieldCondition(CLUSTER_KEY, match=MatchAny(sorted(where.cluster_ids))))
        if where.exclude_ids:
            must_not.append(HasIdCondition(set(where.exclude_ids)))
    return Filter(must=must, must_not=must_not or None)


BUSY_WAIT_S = 5.0


def _load(path: Path, config: Any) -> EdgeShard:
    """Open a shard, waiting a little if another process holds it, then failing clearly."""
    deadline = time.monotonic() + BUSY_WAIT_S
    delay = 0.05
    while True:
        try:
            return EdgeShard.load(str(path), config) if config is not None else EdgeShard.load(str(path))
        except Exception as exc:  # Edge raises bare Exception; the WAL lock shows as WouldBlock
            if "WouldBlock" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                # Engram's processes share the index through its owner (shared_edge.py): this one
                # opened it directly, e.g. an older Engram or a benchmark on the same directory.
                raise VectorIndexBusy(
                    f"the vector index under {path.parent.parent} is open in another process that does not "
                    "share it (an older Engram, or a tool that opens the index itself): stop that process "
                    "and retry",
                    path=str(path),
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class EdgeVectorIndex:
    """Collections as Qdrant Edge shards under `root`; thread-safe within one process."""

    def __init__(
        self,
        root: Path,
        *,
        indexing_threshold_kb: int | None = None,
        hnsw_ef: int | None = None,
        search_threads: int | None = 1,
        disk_reserve_bytes: int = DISK_RESERVE_BYTES,
    ) -> None:
        """`indexing_threshold_kb`: segments smaller than this stay unindexed by `optimize()`
        (Qdrant's default, 10 MB, when None); tests lower it to exercise HNSW on small data.
        The threshold is stored with a collection when it is created.
        `hnsw_ef`: search breadth once HNSW is built (the engine's default when None): higher
        trades latency for recall.
        `search_threads`: the size of each shard's search pool, which reads a search's segments in
        parallel (None: the engine's default, from the CPU count). Set at every open (ADR 0019).
        `disk_reserve_bytes`: the free space a write must leave (see the module's docstring)."""
        self._root = Path(root)
        self._collections_dir = self._root / "collections"
        self._collections_dir.mkdir(parents=True, exist_ok=True)
        self._disk = DiskReserve(self._root, disk_reserve_bytes)
        self._aliases_path = self._root / ALIASES_FILE
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_threads = search_threads
        self._search_params = SearchParams(hnsw_ef=hnsw_ef) if hnsw_ef is not None else None
        # One lock for the shard table and the alias cache: both change rarely, reads are short.
        self._lock = threading.RLock()
        self._shards: dict[str, EdgeShard] = {}
        self._dims: dict[str, int] = {}
        self._aliases: dict[str, str] = {}
        self._aliases_stamp: tuple[int, int, int] | None = None
        self._closed = False
        # Exclusion per collection, for `optimize()`: `_blocked[c]` False holds new writes to c,
        # True holds every use; `_users` counts the uses in flight, by (collection, is_write).
        self._cond = threading.Condition(self._lock)
        self._blocked: dict[str, bool] = {}
        self._users: Counter[tuple[str, bool]] = Counter()
        # Writes one at a time, so a journal replays them in the order the shard applied them.
        self._write_lock = threading.Lock()
        self._journals: dict[str, list[UpdateOperation]] = {}
        self._optimizing = threading.Lock()
        self._child: subprocess.Popen[str] | None = None
        self.last_optimize: dict[str, Any] = {}
        """What the last `optimize()` did and how long each step took (for benchmarks and logs)."""
        self._recover()

    # -- collections -------------------------------------------------------------------------

    def ensure_collection(self, name: str, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        collection = self._resolve(name)
        with self._cond:
            self._cond.wait_for(lambda: collection not in self._blocked)
            self._check_open()
            shard = self._shards.get(collection)
            if shard is None:
                config = self._config(dim)
                path = self._collection_path(collection)
                if (path / _CONFIG_FILE).exists():
                    # Loading with a config makes Edge check the stored vector size against it.
                    try:
                        shard = _load(path, config)
                    except VectorIndexBusy:
                        raise
                    except Exception as exc:
                        # Edge raises bare Exception; a size mismatch is the caller's error.
                        if "incompatible" in str(exc).lower():
                            raise ValueError(
                                f"collection {collection!r} does not hold {dim}-dim vectors: {exc}"
                            ) from exc
                        raise
                else:
                    self._disk.require(NEW_SHARD_BYTES, factor=1)
                    with reported_as_storage_full(path):
                        shard = EdgeShard.create(str(path), config)
                    log.info("vector_collection_created", engine="edge", collection=collection, dim=dim)
                self._shards[collection] = shard
                self._dims[collection] = dim
            elif self._dims.get(collection, dim) != dim:
                raise ValueError(
                    f"collection {collection!r} holds {self._dims[collection]}-dim vectors, not {dim}"
                )
            else:
                self._dims[collection] = dim
            # Also on an existing shard: a crash between create and the indexes leaves them missing.
            existing = set(shard.info().payload_schema)
            for field, schema in _payload_indexes().items():
                if field not in existing:
                    self._disk.require()
                    operation = UpdateOperation.create_field_index(field, schema)
                    shard.update(operation)
                    if collection in self._journals:
                        self._journals[collection].append(operation)

    def drop_collection(self, name: str) -> None:
        collection = self._resolve(name)
        with self._lock:
            self._check_open()
            self._journals.pop(collection, None)  # an optimization in flight is dropped with it
            shard = self._shards.pop(collection, None)
            self._dims.pop(collection, None)
            if shard is not None:
                shard.close()
            path = self._collection_path(collection)
            if path.exists():
                shutil.rmtree(path)
                log.info("vector_collection_dropped", engine="edge", collection=collection)
            # As Qdrant does: an alias does not outlive its collection.
            with self._aliases_update() as aliases:
                for alias in [a for a, c in aliases.items() if c == collection]:
                    del aliases[alias]

    def collection_exists(self, name: str) -> bool:
        return (self._collection_path(self._resolve(name)) / _CONFIG_FILE).exists()

    def list_collections(self) -> list[str]:
        return sorted(p.name for p in self._collections_dir.iterdir() if p.is_dir())

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        latest = latest_per_id(points)
        if not latest:
            return
        edge_points = [Point(p.id, vector_list(p.vector), dict(p.payload)) for p in latest]
        self._disk.require(sum(len(p.vector) * 4 + PAYLOAD_BYTES for p in latest))
        self._apply(
            collection,
            [
                UpdateOperation.upsert_points(
                    edge_points, condition=_not_newer_than(group_by_position(latest))
                )
            ],
        )

    def set_payloads(self, collection: str, updates: Sequence[PayloadUpdate]) -> None:
        latest = latest_per_id(updates)
        if not latest:
            return
        # One operation per distinct payload: its filter both selects the points and carries the
        # monotonic condition, so the check and the write are one engine operation; a missing point
        # matches nothing.
        self._disk.require(len(latest) * PAYLOAD_BYTES)
        self._apply(
            collection,
            [
                UpdateOperation.overwrite_payload_by_filter(
                    _not_newer_than({int(payload[POSITION_KEY]): ids}), dict(payload)
                )
                for payload, ids in group_by_payload(latest)
            ],
        )

    def patch_payloads(self, collection: str, patches: Sequence[PayloadPatch]) -> None:
        operations = [
            UpdateOperation.set_payload_by_filter(
                _not_newer_than({patch.position: list(patch.ids)}), patch_payload(patch)
            )
            for patch in patches
            if patch.ids
        ]
        if operations:
            self._disk.require(sum(len(p.ids) for p in patches) * PAYLOAD_BYTES)
            self._apply(collection, operations)

    def delete(self, collection: str, ids: Sequence[UUID]) -> None:
        if not ids:
            return
        self._disk.require(len(ids) * PAYLOAD_BYTES)
        self._apply(collection, [UpdateOperation.delete_points(list(ids))])

    def _apply(self, collection: str, operations: Sequence[UpdateOperation]) -> None:
        """Apply `operations`; every caller first checks the disk has room for them (`_disk`)."""
        with self._write_lock, self._using(collection, write=True) as (name, shard):
            for operation in operations:
                shard.update(operation)
            journal = self._journals.get(name)
            if journal is not None:
                journal.extend(operations)

    # -- reads -------------------------------------------------------------------------------

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
        if limit <= 0:
            return []
        request = QueryRequest(
            limit=limit,
            query=Query.Nearest(vector_list(vector)),
            filter=_being_filter(being_id, where),
            score_threshold=score_threshold,
            params=self._search_params,
            with_payload=with_payload,
            with_vector=with_vectors,
        )
        with self._using(collection, write=False) as (_, shard):
            hits = shard.query(request)
        return [
            ScoredPoint(
                id=as_uuid(hit.id),
                score=float(hit.score),
                payload=hit.payload or {},
                vector=as_vector(hit.vector) if with_vectors and hit.vector is not None else None,
            )
            for hit in hits
        ]

    def retrieve(
        self, collection: str, being_id: UUID, ids: Sequence[UUID], *, with_vectors: bool = False
    ) -> list[ScoredPoint]:
        if not ids:
            return []
        # Edge's retrieve needs with_vector positionally despite its stub's default.
        with self._using(collection, write=False) as (_, shard):
            records = shard.retrieve(list(ids), True, with_vectors)
        being = str(being_id)
        return [
            ScoredPoint(
                id=as_uuid(record.id),
                score=0.0,
                payload=record.payload or {},
                vector=as_vector(record.vector) if with_vectors and record.vector is not None else None,
            )
            for record in records
            if (record.payload or {}).get(BEING_KEY) == being
        ]

    def count(self, collection: str, being_id: UUID | None = None) -> int:
        flt = None
        if being_id is not None:
            flt = Filter(must=[FieldCondition(BEING_KEY, match=MatchValue(str(being_id)))])
        with self._using(collection, write=False) as (_, shard):
            return int(shard.count(CountRequest(exact=True, filter=flt)))

    # -- aliases -----------------------------------------------------------------------------

    def set_alias(self, alias: str, collection: str) -> None:
        check_name(alias)
        target = self._resolve(collection)
        if not self.collection_exists(target):
            raise ValueError(f"collection {target!r} does not exist")
        if (self._collection_path(alias) / _CONFIG_FILE).exists():
            raise ValueError(f"{alias!r} is a collection, it cannot also be an alias")
        with self._aliases_update() as aliases:
            previous = aliases.get(alias)
            aliases[alias] = target
        log.info("vector_alias_set", engine="edge", alias=alias, collection=target, previous=previous)

    def resolve_alias(self, alias: str) -> str | None:
        return self._alias_target(alias)

    # -- maintenance -------------------------------------------------------------------------

    def index_stats(self, collection: str) -> IndexStats:
        with self._using(collection, write=False) as (_, shard):
            info = shard.info()
        return IndexStats(points=int(info.points_count), indexed=int(info.indexed_vectors_count))

    def optimize(self, collection: str) -> None:
        """Build the HNSW index (and merge segments) of `collection`, blocking the caller until done.

        Edge's build holds the GIL for its whole length (~64 s for 100k x 384 on 2 cores), so it
        runs in a child process on a copy of the shard: this process keeps searching (brute force)
        and writing meanwhile. Writes are held while the shard is copied, every write after that
        is journaled and replayed onto the optimized copy, and the copy replaces the shard with
        every use of the collection held (the copy's reload and the journal's tail: well under a
        second at 100k). One optimization at a time per instance.
        """
        name = self._resolve(collection)
        path = self._collection_path(name)
        copy = self._root / _OPTIMIZING_DIR / name
        retired = self._root / _RETIRED_DIR / name
        with self._optimizing, self._process_lock():
            started = time.perf_counter()
            shutil.rmtree(copy, ignore_errors=True)
            # The copy, and what the child's build writes beside it before it drops the old segments.
            self._disk.require(_allocated_bytes(path), factor=2)
            copy.parent.mkdir(parents=True, exist_ok=True)
            with self._frozen(name, reads=False):
                self._journals[name] = []  # before the copy: a drop meanwhile cancels the swap
                self._shard(name).flush()
                shutil.copytree(path, copy)
            copied = time.perf_counter()
            try:
                changed = self._optimize_copy(copy)
                built = time.perf_counter()
                paused = 0.0
                if changed:
                    paused = self._swap_in(name, copy, retired)
            finally:
                self._journals.pop(name, None)
                shutil.rmtree(copy, ignore_errors=True)
                if (path / _CONFIG_FILE).exists():  # else retired/ holds the only copy: keep it
                    shutil.rmtree(retired, ignore_errors=True)
        self.last_optimize = {
            "collection": name,
            "changed": changed,
            "copy_s": round(copied - started, 3),
            "build_s": round(built - copied, 3),
            "swap_pause_s": round(paused, 3),
            "seconds": round(time.perf_counter() - started, 3),
        }
        log.info("vector_collection_optimized", engine="edge", **self.last_optimize)

    def _optimize_copy(self, copy: Path) -> bool:
        """Run Edge's optimizer on `copy` in a child process; True if it changed anything."""
        with self._lock:
            self._check_open()
            child = self._child = subprocess.Popen(  # noqa: S603 (our interpreter, our code, our path)
                [sys.executable, "-c", _OPTIMIZE_CHILD, str(copy)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        try:
            out, err = child.communicate()
        finally:
            with self._lock:
                self._child = None
        if child.returncode == -signal.SIGBUS:  # a full disk under the copy's mapped files
            raise StorageFull(str(copy), "the index build ran out of space")
        if child.returncode != 0:
            raise RuntimeError(
                f"optimizing {copy.name} failed (exit {child.returncode}): {err.strip()[-2000:]}"
            )
        return out.strip() == "changed"

    def _swap_in(self, name: str, copy: Path, retired: Path) -> float:
        """Replay the journal onto the optimized copy and put it in the shard's place; returns
        how long every use of the collection was held."""
        self._disk.require()  # the journal's writes onto the copy
        replacement = _load(copy, self._open_config(copy))
        closed = False
        try:
            done = self._replay(name, replacement, 0)  # most of it while the shard still serves
            with self._frozen(name, reads=True):
                held = time.perf_counter()
                with self._lock:
                    if name not in self._journals or self._closed:  # dropped or closed meanwhile
                        return 0.0
                self._replay(name, replacement, done)
                replacement.flush()
                replacement.close()
                closed = True
                path = self._collection_path(name)
                with self._lock:
                    old = self._shards.pop(name, None)
                if old is not None:
                    old.flush()
                    old.close()
                retired.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(retired, ignore_errors=True)
                # Each rename is atomic; between the two a crash leaves the complete original in
                # retired/, which `_recover` puts back.
                os.rename(path, retired)
                try:
                    os.rename(copy, path)
                except BaseException:
                    os.rename(retired, path)
                    raise
                _fsync_dir(self._collections_dir)
                _fsync_dir(retired.parent)
                shard = _load(path, self._open_config(path))
                with self._lock:
                    self._shards[name] = shard
                return time.perf_counter() - held
        finally:
            if not closed:
                replacement.close()

    def _replay(self, name: str, shard: EdgeShard, start: int) -> int:
        """Apply the journal of `name` from `start` onto `shard`; returns where it stopped."""
        while True:
            with self._lock:
                pending = list(self._journals.get(name, ())[start:])
            if not pending:
                return start
            for operation in pending:
                shard.update(operation)
            start += len(pending)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._child is not None:  # an optimization in flight: its copy is thrown away
                self._child.terminate()
            shards, self._shards = self._shards, {}
            for name, shard in shards.items():
                try:
                    shard.flush()
                finally:
                    shard.close()
                log.debug("vector_collection_closed", engine="edge", collection=name)

    # -- internals ---------------------------------------------------------------------------

    def _config(self, dim: int) -> EdgeConfig:
        optimizers = None
        if self._indexing_threshold_kb is not None:
            optimizers = EdgeOptimizersConfig(indexing_threshold=self._indexing_threshold_kb)
        hnsw = HnswIndexConfig(
            m=HNSW_M,
            ef_construct=HNSW_EF_CONSTRUCT,
            full_scan_threshold=FULL_SCAN_THRESHOLD_KB,
            payload_m=HNSW_PAYLOAD_M,
        )
        return EdgeConfig(
            vectors=EdgeVectorParams(size=dim, distance=Distance.Cosine),
            hnsw_config=hnsw,
            optimizers=optimizers,
            max_search_threads=self._search_threads,
        )

    def _open_config(self, path: Path) -> EdgeConfig | None:
        """What to load a shard with when its size is not known here: the stored vector size (Edge
        needs one in any config) and this index's search threads; the rest stays as stored."""
        if self._search_threads is None:
            return None
        stored = json.loads((path / _CONFIG_FILE).read_text())
        [params] = stored["vectors"].values()
        return EdgeConfig(
            vectors=EdgeVectorParams(size=int(params["size"]), distance=Distance.Cosine),
            max_search_threads=self._search_threads,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("EdgeVectorIndex is closed")

    def _collection_path(self, collection: str) -> Path:
        return self._collections_dir / check_name(collection)

    def _resolve(self, name: str) -> str:
        """The collection behind `name`: its alias target, or `name` itself."""
        return self._alias_target(check_name(name)) or name

    def _shard(self, name: str) -> EdgeShard:
        collection = self._resolve(name)
        with self._lock:
            return self._shard_locked(collection)

    def _shard_locked(self, collection: str) -> EdgeShard:
        self._check_open()
        shard = self._shards.get(collection)
        if shard is None:
            path = self._collection_path(collection)
            if not (path / _CONFIG_FILE).exists():
                raise KeyError(f"vector collection {collection!r} does not exist")
            shard = _load(path, self._open_config(path))
            self._shards[collection] = shard
        return shard

    @contextlib.contextmanager
    def _using(self, name: str, *, write: bool) -> Iterator[tuple[str, EdgeShard]]:
        """The shard behind `name`, counted as in use until the block ends (see `_frozen`)."""
        collection = self._resolve(name)
        key = (collection, write)
        with self._cond:
            while (blocked := self._blocked.get(collection)) is not None and (write or blocked):
                self._cond.wait()
            shard = self._shard_locked(collection)
            self._users[key] += 1
        try:
            yield collection, shard
        finally:
            with self._cond:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key]
                    self._cond.notify_all()

    @contextlib.contextmanager
    def _frozen(self, collection: str, *, reads: bool) -> Iterator[None]:
        """Hold new writes (and new reads, if `reads`) of `collection`, and wait for those in flight."""
        with self._cond:
            self._blocked[collection] = reads
            self._cond.wait_for(
                lambda: not any(n for (c, w), n in self._users.items() if c == collection and (w or reads))
            )
        try:
            yield
        finally:
            with self._cond:
                del self._blocked[collection]
                self._cond.notify_all()

    @contextlib.contextmanager
    def _process_lock(self) -> Iterator[None]:
        with open(self._root / _OPTIMIZE_LOCK, "a+b") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _recover(self) -> None:
        """Finish what an optimization cut short by a crash: drop half-built copies, put back an
        original whose replacement never reached its place. Skipped while another process optimizes."""
        optimizing, retired = self._root / _OPTIMIZING_DIR, self._root / _RETIRED_DIR
        if not optimizing.exists() and not retired.exists():
            return
        with open(self._root / _OPTIMIZE_LOCK, "a+b") as lock_file:
            try:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            try:
                for leftover in optimizing.glob("*"):
                    shutil.rmtree(leftover, ignore_errors=True)
                for old in retired.glob("*"):
                    target = self._collections_dir / old.name
                    if (target / _CONFIG_FILE).exists():
                        shutil.rmtree(old, ignore_errors=True)
                    else:
                        shutil.rmtree(target, ignore_errors=True)
                        os.rename(old, target)
                        log.warning("vector_collection_restored", engine="edge", collection=old.name)
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _alias_target(self, alias: str) -> str | None:
        with self._lock:
            self._refresh_aliases()
            return self._aliases.get(alias)

    def _refresh_aliases(self) -> None:
        # Another process may have switched an alias: reread when the file changed. os.replace
        # gives the file a new inode, so the stamp changes even within one mtime tick.
        try:
            st = os.stat(self._aliases_path)
        except FileNotFoundError:
            self._aliases, self._aliases_stamp = {}, None
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._aliases_stamp:
            self._aliases = self._read_aliases()
            self._aliases_stamp = stamp

    def _read_aliases(self) -> dict[str, str]:
        try:
            raw = json.loads(self._aliases_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        if not isinstance(raw, dict):
            raise ValueError(f"{self._aliases_path} does not hold a JSON object")
        return {str(k): str(v) for k, v in raw.items()}

    @contextlib.contextmanager
    def _aliases_update(self) -> Iterator[dict[str, str]]:
        """Read-modify-write of aliases.json under a cross-process lock; the write is atomic."""
        with self._lock, open(self._root / _ALIASES_LOCK, "a+b") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                aliases = self._read_aliases()
                before = dict(aliases)
                yield aliases
                if aliases != before:
                    self._write_aliases(aliases)
                self._aliases_stamp = None  # force a reread on the next resolve
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _write_aliases(self, aliases: Mapping[str, str]) -> None:
        with reported_as_storage_full(self._aliases_path):
            self._replace_aliases(aliases)

    def _replace_aliases(self, aliases: Mapping[str, str]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".aliases.", suffix=".tmp", dir=self._root)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(dict(sorted(aliases.items())), f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._aliases_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        # The rename itself must reach the disk, or a crash could bring the old aliases back.
        _fsync_dir(self._root)


def _allocated_bytes(path: Path) -> int:
    """The disk space the files under `path` take (their mapped files are sparse: not their sizes)."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def _fsync_dir(path: Path) -> None:
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
