"""`VectorIndex` on Qdrant Edge (`qdrant-edge-py`): Qdrant's engine inside this process.

Layout under `root`:
- `collections/<name>/` one EdgeShard per collection (Edge allows one open shard per
  directory, so one process owns a collection at a time);
- `aliases.json` alias -> collection, replaced atomically; Edge has no aliases of its own;
- `aliases.lock` serialises read-modify-write of `aliases.json` between processes.

Monotonic writes are conditional upserts done by the engine (`upsert_points(condition=...)`):
an existing point is overwritten only if its stored `position` is <= the new one, a missing
point is inserted. Payload replacement uses `overwrite_payload_by_filter` with the same
condition. No read-before-write, so no race between the read and the write.

Searches are exact (brute force over the being's points, driven by the payload index) until
`optimize()` builds HNSW; Edge never optimizes on its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import threading
import time
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

from adapters.vectors._common import (
    CLUSTER_KEY,
    FULL_SCAN_THRESHOLD_KB,
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    HNSW_PAYLOAD_M,
    STATUS_KEY,
    as_uuid,
    as_vector,
    check_name,
    group_by_position,
    latest_per_id,
    vector_list,
)
from projections.vector_index import (
    BEING_KEY,
    POSITION_KEY,
    PayloadUpdate,
    ScoredPoint,
    SearchFilter,
    Vector,
    VectorIndexBusy,
    VectorPoint,
)

log = structlog.get_logger(__name__)

_CONFIG_FILE = "edge_config.json"  # written by EdgeShard.create: its presence means "collection exists"
_ALIASES_FILE = "aliases.json"
_ALIASES_LOCK = "aliases.lock"


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
                raise VectorIndexBusy(
                    f"the vector index under {path.parent.parent} is in use by another Engram process "
                    "(engram serve or engram worker). Use that process (the HTTP API), stop it, or run a "
                    "Qdrant server (ENGRAM_QDRANT_URL) for deployments with several processes.",
                    path=str(path),
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class EdgeVectorIndex:
    """Collections as Qdrant Edge shards under `root`; thread-safe within one process."""

    def __init__(
        self, root: Path, *, indexing_threshold_kb: int | None = None, hnsw_ef: int | None = None
    ) -> None:
        """`indexing_threshold_kb`: segments smaller than this stay unindexed by `optimize()`
        (Qdrant's default, 10 MB, when None); tests lower it to exercise HNSW on small data.
        The threshold is stored with a collection when it is created.
        `hnsw_ef`: search breadth once HNSW is built (the engine's default when None): higher
        trades latency for recall."""
        self._root = Path(root)
        self._collections_dir = self._root / "collections"
        self._collections_dir.mkdir(parents=True, exist_ok=True)
        self._aliases_path = self._root / _ALIASES_FILE
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_params = SearchParams(hnsw_ef=hnsw_ef) if hnsw_ef is not None else None
        # One lock for the shard table and the alias cache: both change rarely, reads are short.
        self._lock = threading.RLock()
        self._shards: dict[str, EdgeShard] = {}
        self._dims: dict[str, int] = {}
        self._aliases: dict[str, str] = {}
        self._aliases_stamp: tuple[int, int, int] | None = None
        self._closed = False

    # -- collections -------------------------------------------------------------------------

    def ensure_collection(self, name: str, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        collection = self._resolve(name)
        with self._lock:
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
                    shard.update(UpdateOperation.create_field_index(field, schema))

    def drop_collection(self, name: str) -> None:
        collection = self._resolve(name)
        with self._lock:
            self._check_open()
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

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        latest = latest_per_id(points)
        if not latest:
            return
        shard = self._shard(collection)
        edge_points = [Point(p.id, vector_list(p.vector), dict(p.payload)) for p in latest]
        shard.update(
            UpdateOperation.upsert_points(edge_points, condition=_not_newer_than(group_by_position(latest)))
        )

    def set_payloads(self, collection: str, updates: Sequence[PayloadUpdate]) -> None:
        latest = latest_per_id(updates)
        if not latest:
            return
        shard = self._shard(collection)
        for update in latest:
            # The filter both selects the point and carries the monotonic condition, so the
            # check and the write are one engine operation; a missing point matches nothing.
            condition = _not_newer_than({int(update.payload[POSITION_KEY]): [update.id]})
            shard.update(UpdateOperation.overwrite_payload_by_filter(condition, dict(update.payload)))

    def delete(self, collection: str, ids: Sequence[UUID]) -> None:
        if not ids:
            return
        self._shard(collection).update(UpdateOperation.delete_points(list(ids)))

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
    ) -> list[ScoredPoint]:
        if limit <= 0:
            return []
        hits = self._shard(collection).query(
            QueryRequest(
                limit=limit,
                query=Query.Nearest(vector_list(vector)),
                filter=_being_filter(being_id, where),
                score_threshold=score_threshold,
                params=self._search_params,
                with_payload=True,
                with_vector=with_vectors,
            )
        )
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
        records = self._shard(collection).retrieve(list(ids), True, with_vectors)
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
        return int(self._shard(collection).count(CountRequest(exact=True, filter=flt)))

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

    def optimize(self, collection: str) -> None:
        """Build the HNSW index (and merge segments) of `collection`, blocking until done.

        Edge runs this in the calling thread **and holds the GIL the whole time**: every other
        thread of the process stops (measured: ~64 s for 100k x 384 on 2 cores). Call it from
        a maintenance command or a separate process, never on a request or projection path;
        searches and upserts never call it.
        """
        shard = self._shard(collection)
        started = time.perf_counter()
        changed = shard.optimize()
        log.info(
            "vector_collection_optimized",
            engine="edge",
            collection=self._resolve(collection),
            changed=changed,
            seconds=round(time.perf_counter() - started, 3),
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
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
            self._check_open()
            shard = self._shards.get(collection)
            if shard is None:
                path = self._collection_path(collection)
                if not (path / _CONFIG_FILE).exists():
                    raise KeyError(f"vector collection {collection!r} does not exist")
                shard = _load(path, None)
                self._shards[collection] = shard
            return shard

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
        dir_fd = os.open(self._root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
