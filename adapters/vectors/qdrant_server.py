"""`VectorIndex` on `qdrant-client`: a Qdrant server by URL, or the client's local mode (tests).

Monotonic writes are conditional on both: `upsert(update_filter=...)` overwrites an existing
point only if its stored `position` is <= the new one and inserts missing points, and payload
replacement (`overwrite_payload`) and patches (`set_payload`) select their points with a filter
carrying the same condition.
The engine checks and writes in one operation, so there is no read-before-write race.
qdrant-client 1.20's local mode honours both (checked by the contract suite).

Aliases are Qdrant's own: data calls pass the name through and the server resolves an alias
atomically per request. Collection management (`ensure_collection`, `drop_collection`,
`collection_exists`) resolves explicitly, since those act on the collection itself.

Local mode (`in_memory()`) is pure-Python brute force that ignores payload indexes: fine for
tests, far too slow for real data (see the benchmark script).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from engram.adapters.vectors._common import (
    CLUSTER_KEY,
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
    VectorPoint,
)

log = structlog.get_logger(__name__)


def _payload_indexes() -> dict[str, qm.KeywordIndexParams | qm.IntegerIndexParams]:
    return {
        # is_tenant: the server groups each being's points on disk and builds its HNSW graph.
        BEING_KEY: qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True),
        STATUS_KEY: qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, enable_hnsw=False),
        CLUSTER_KEY: qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, enable_hnsw=False),
        POSITION_KEY: qm.IntegerIndexParams(
            type=qm.IntegerIndexType.INTEGER, lookup=True, range=True, enable_hnsw=False
        ),
    }


def _not_newer_than(groups: Mapping[int, list[UUID]]) -> qm.Filter:
    """Matches an existing point iff its stored position is <= the position written to it.

    Equal passes, so a replayed batch is idempotent. One clause per distinct position, each id
    in exactly one clause.
    """
    return qm.Filter(
        should=[
            qm.Filter(
                must=[
                    qm.HasIdCondition(has_id=[str(i) for i in ids]),
                    qm.FieldCondition(key=POSITION_KEY, range=qm.Range(lte=position)),
                ]
            )
            for position, ids in groups.items()
        ]
    )


def _being_filter(being_id: UUID, where: SearchFilter | None) -> qm.Filter:
    must: list[qm.Condition] = [qm.FieldCondition(key=BEING_KEY, match=qm.MatchValue(value=str(being_id)))]
    must_not: list[qm.Condition] = []
    if where is not None:
        if where.statuses is not None:
            must.append(qm.FieldCondition(key=STATUS_KEY, match=qm.MatchAny(any=sorted(where.statuses))))
        if where.cluster_ids is not None:
            must.append(qm.FieldCondition(key=CLUSTER_KEY, match=qm.MatchAny(any=sorted(where.cluster_ids))))
        if where.exclude_ids:
            must_not.append(qm.HasIdCondition(has_id=[str(i) for i in where.exclude_ids]))
    return qm.Filter(must=must, must_not=must_not or None)


def _to_scored(point_id: Any, score: float, payload: Any, vector: Any, with_vectors: bool) -> ScoredPoint:
    return ScoredPoint(
        id=as_uuid(point_id),
        score=float(score),
        payload=payload or {},
        vector=as_vector(vector) if with_vectors and vector is not None else None,
    )


class QdrantVectorIndex:
    """Collections in Qdrant through `qdrant-client` (server or local mode)."""

    def __init__(
        self, client: QdrantClient, *, owns_client: bool = False, hnsw_ef: int | None = None
    ) -> None:
        """`owns_client`: close `client` on `close()` (the constructor helpers set it).
        `hnsw_ef`: search breadth (the server's default when None): higher trades latency for recall."""
        self._client = client
        self._owns_client = owns_client
        self._search_params = qm.SearchParams(hnsw_ef=hnsw_ef) if hnsw_ef is not None else None

    @classmethod
    def from_url(
        cls, url: str, api_key: str | None = None, *, hnsw_ef: int | None = None
    ) -> QdrantVectorIndex:
        return cls(QdrantClient(url=url, api_key=api_key), owns_client=True, hnsw_ef=hnsw_ef)

    @classmethod
    def in_memory(cls) -> QdrantVectorIndex:
        """Local mode in memory: tests only (pure-Python brute force, payload indexes ignored)."""
        return cls(QdrantClient(":memory:"), owns_client=True)

    # -- collections -------------------------------------------------------------------------

    def ensure_collection(self, name: str, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        collection = self._resolve(name)
        if not self._client.collection_exists(collection):
            try:
                self._client.create_collection(
                    collection,
                    vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                    hnsw_config=qm.HnswConfigDiff(m=HNSW_M, payload_m=HNSW_PAYLOAD_M),
                )
                log.info("vector_collection_created", engine="qdrant", collection=collection, dim=dim)
            except Exception:
                # Another process may have created it in between; anything else is real.
                if not self._client.collection_exists(collection):
                    raise
        info = self._client.get_collection(collection)
        vectors = info.config.params.vectors
        if isinstance(vectors, qm.VectorParams) and vectors.size != dim:
            raise ValueError(f"collection {collection!r} holds {vectors.size}-dim vectors, not {dim}")
        # Also on an existing collection: a crash between create and the indexes leaves them missing.
        existing = set(info.payload_schema or {})
        with warnings.catch_warnings():
            # Local mode warns that it ignores payload indexes; creating them keeps one code path.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            for field, schema in _payload_indexes().items():
                if field not in existing:
                    self._client.create_payload_index(collection, field, field_schema=schema, wait=True)

    def drop_collection(self, name: str) -> None:
        collection = self._resolve(name)
        # Qdrant deletes the collection's aliases with it.
        if self._client.delete_collection(collection):
            log.info("vector_collection_dropped", engine="qdrant", collection=collection)

    def collection_exists(self, name: str) -> bool:
        return bool(self._client.collection_exists(self._resolve(name)))

    def list_collections(self) -> list[str]:
        return sorted(c.name for c in self._client.get_collections().collections)

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        latest = latest_per_id(points)
        if not latest:
            return
        self._client.upsert(
            check_name(collection),
            points=[
                qm.PointStruct(id=str(p.id), vector=vector_list(p.vector), payload=dict(p.payload))
                for p in latest
            ],
            update_filter=_not_newer_than(group_by_position(latest)),
            wait=True,
        )

    def set_payloads(self, collection: str, updates: Sequence[PayloadUpdate]) -> None:
        latest = latest_per_id(updates)
        if not latest:
            return
        # One request for the batch, one operation per distinct payload; each operation's filter
        # selects its points and carries the monotonic condition, so a missing or newer point simply
        # matches nothing.
        operations: list[qm.UpdateOperation] = [
            qm.OverwritePayloadOperation(
                overwrite_payload=qm.SetPayload(
                    payload=dict(payload),
                    filter=_not_newer_than({int(payload[POSITION_KEY]): ids}),
                )
            )
            for payload, ids in group_by_payload(latest)
        ]
        self._client.batch_update_points(check_name(collection), operations, wait=True)

    def patch_payloads(self, collection: str, patches: Sequence[PayloadPatch]) -> None:
        # One request, one operation per patch, applied in order; the filter carries the monotonic
        # condition, and `set_payload` keeps the fields a patch does not name.
        operations: list[qm.UpdateOperation] = [
            qm.SetPayloadOperation(
                set_payload=qm.SetPayload(
                    payload=patch_payload(patch), filter=_not_newer_than({patch.position: list(patch.ids)})
                )
            )
            for patch in patches
            if patch.ids
        ]
        if operations:
            self._client.batch_update_points(check_name(collection), operations, wait=True)

    def delete(self, collection: str, ids: Sequence[UUID]) -> None:
        if not ids:
            return
        self._client.delete(
            check_name(collection), points_selector=qm.PointIdsList(points=[str(i) for i in ids]), wait=True
        )

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
        response = self._client.query_points(
            check_name(collection),
            query=vector_list(vector),
            query_filter=_being_filter(being_id, where),
            limit=limit,
            score_threshold=score_threshold,
            search_params=self._search_params,
            with_payload=with_payload,
            with_vectors=with_vectors,
        )
        return [_to_scored(p.id, p.score, p.payload, p.vector, with_vectors) for p in response.points]

    def retrieve(
        self, collection: str, being_id: UUID, ids: Sequence[UUID], *, with_vectors: bool = False
    ) -> list[ScoredPoint]:
        if not ids:
            return []
        records = self._client.retrieve(
            check_name(collection), ids=[str(i) for i in ids], with_payload=True, with_vectors=with_vectors
        )
        being = str(being_id)
        return [
            _to_scored(r.id, 0.0, r.payload, r.vector, with_vectors)
            for r in records
            if (r.payload or {}).get(BEING_KEY) == being
        ]

    def count(self, collection: str, being_id: UUID | None = None) -> int:
        flt = None
        if being_id is not None:
            flt = qm.Filter(must=[qm.FieldCondition(key=BEING_KEY, match=qm.MatchValue(value=str(being_id)))])
        return int(self._client.count(check_name(collection), count_filter=flt, exact=True).count)

    # -- aliases -----------------------------------------------------------------------------

    def set_alias(self, alias: str, collection: str) -> None:
        check_name(alias)
        target = self._resolve(collection)
        if not self._client.collection_exists(target):
            raise ValueError(f"collection {target!r} does not exist")
        previous = self.resolve_alias(alias)
        operations: list[qm.AliasOperations] = []
        if previous is not None:
            operations.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=alias)))
        operations.append(
            qm.CreateAliasOperation(create_alias=qm.CreateAlias(collection_name=target, alias_name=alias))
        )
        # One call: the server applies the delete and the create as one switch.
        self._client.update_collection_aliases(change_aliases_operations=operations)
        log.info("vector_alias_set", engine="qdrant", alias=alias, collection=target, previous=previous)

    def resolve_alias(self, alias: str) -> str | None:
        for description in self._client.get_aliases().aliases:
            if description.alias_name == alias:
                return str(description.collection_name)
        return None

    # -- maintenance -------------------------------------------------------------------------

    def index_stats(self, collection: str) -> IndexStats:
        """All points count as indexed: a server indexes on its own, and local mode has no index
        to build, so maintenance never has anything to do here."""
        points = self.count(collection)
        return IndexStats(points=points, indexed=points)

    def optimize(self, collection: str) -> None:
        """A no-op: a Qdrant server builds HNSW in the background, and local mode has no index."""

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    # -- internals ---------------------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        return self.resolve_alias(check_name(name)) or name
