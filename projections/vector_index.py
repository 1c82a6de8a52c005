"""The `VectorIndex` port: vector collections for nodes and cluster centroids.

Adapters: Qdrant Edge (`adapters/vectors/edge.py`), shared by the processes of a data directory
through the one that owns it (the embedded default, `adapters/vectors/shared_edge.py`, ADR 0036), and
`qdrant-client` (a Qdrant server by URL, or its local mode for tests,
`adapters/vectors/qdrant_server.py`). All pass `tests/contract/test_vector_index.py`.

Rules every adapter keeps:
- every search is scoped to one being: `being_id` is a required argument, there is no
  unscoped search;
- writes are idempotent and monotonic: a write carrying an older log `position` than the point
  already holds is ignored, so replaying a batch after a crash can never move a point backwards.
  Upserts write a point's whole state; a payload patch writes some fields (and the position), for
  writers that send every field their events changed since the point's state was last written;
- collections are reached through aliases, so a rebuild fills a new collection and switches
  the alias atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol
from uuid import UUID

import numpy as np
import numpy.typing as npt

from engram.domain.errors import DomainError


class ServiceUnavailable(DomainError):
    code = "unavailable"


Vector = npt.NDArray[np.float32]


class VectorIndexBusy(ServiceUnavailable):
    """The embedded index is held by another Engram process (Qdrant Edge opens a shard in one process only)."""

    code = "vector_index_busy"


BEING_KEY = "being_id"
POSITION_KEY = "position"


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """A point to write: its whole state. `payload` must hold `being_id` (str) and `position` (int)."""

    id: UUID
    vector: Vector
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PayloadUpdate:
    """Replace a point's whole payload (the vector stays), if `position` is not older than the point's."""

    id: UUID
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PayloadPatch:
    """Set `fields` and `position` in the payloads of the points `ids` whose stored position is not
    newer than `position`; their other payload fields and their vectors stay."""

    ids: Sequence[UUID]
    fields: Mapping[str, Any]
    position: int


class ScoredPoint(NamedTuple):
    """A search hit. A named tuple rather than a frozen dataclass: a search makes one per hit (100 for
    `query`), and a frozen dataclass takes ~1.4 µs to build against ~0.3 µs."""

    id: UUID
    score: float
    payload: Mapping[str, Any]
    vector: Vector | None = None


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Conditions beyond the being. Each set is an OR over its values; the fields are ANDed."""

    statuses: frozenset[str] | None = None
    cluster_ids: frozenset[str] | None = None
    exclude_ids: frozenset[UUID] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class IndexStats:
    """How much of a collection the engine's vector index (HNSW) covers; the rest is searched exactly."""

    points: int
    indexed: int

    @property
    def unindexed(self) -> int:
        return max(0, self.points - self.indexed)


class VectorIndex(Protocol):
    def ensure_collection(self, name: str, dim: int) -> None:
        """Create the collection (cosine distance) and its payload indexes if missing.

        Payload indexes: `being_id` keyword with `is_tenant=true`, `status` and `cluster_id`
        keywords, `position` integer. Idempotent.
        """
        ...

    def drop_collection(self, name: str) -> None: ...

    def collection_exists(self, name: str) -> bool: ...

    def list_collections(self) -> list[str]:
        """The names of every collection there is (not of the aliases), sorted; also one that a
        process killed while creating it left half made."""
        ...

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Full-state upserts; a point already holding a greater `position` is left as it is."""
        ...

    def set_payloads(self, collection: str, updates: Sequence[PayloadUpdate]) -> None:
        """Replace payloads of existing points (same monotonic rule); missing points are ignored."""
        ...

    def patch_payloads(self, collection: str, patches: Sequence[PayloadPatch]) -> None:
        """Apply the patches in order, one engine operation each however many points it names (a
        batch's thousand status changes are one patch); missing points are ignored."""
        ...

    def delete(self, collection: str, ids: Sequence[UUID]) -> None: ...

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
        """Top `limit` points of one being by cosine similarity, best first.

        `score_threshold` keeps points with score strictly above it. `with_payload=False` leaves
        each point's payload empty (less to copy out of the engine when only ids count).
        """
        ...

    def retrieve(
        self, collection: str, being_id: UUID, ids: Sequence[UUID], *, with_vectors: bool = False
    ) -> list[ScoredPoint]:
        """Points by id, only those of `being_id` (others read as missing); score is 0."""
        ...

    def count(self, collection: str, being_id: UUID | None = None) -> int: ...

    def set_alias(self, alias: str, collection: str) -> None:
        """Point `alias` at `collection` atomically (create or switch)."""
        ...

    def resolve_alias(self, alias: str) -> str | None: ...

    def index_stats(self, collection: str) -> IndexStats:
        """Points in `collection` and how many of them the vector index covers (engines that index
        on their own report all of them)."""
        ...

    def optimize(self, collection: str) -> None:
        """Build indexes (HNSW) where the engine needs an explicit step; a no-op elsewhere.

        Blocks the caller for as long as the build takes (a minute at 100k points on Qdrant Edge):
        run it from maintenance (the worker) or an admin command, never on a request path.
        """
        ...

    def close(self) -> None: ...
