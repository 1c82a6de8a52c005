"""Helpers shared by the `VectorIndex` adapters: input checks and position grouping."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID

import numpy as np

from engram.projections.vector_index import (
    BEING_KEY,
    POSITION_KEY,
    PayloadPatch,
    PayloadUpdate,
    Vector,
    VectorPoint,
)

# Collection and alias names become directory names (Edge) and URL path segments (server):
# a conservative alphabet keeps both safe, including against path traversal.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")

_Item = TypeVar("_Item", VectorPoint, PayloadUpdate)

STATUS_KEY = "status"
CLUSTER_KEY = "cluster_id"

# HNSW as Qdrant recommends for multitenancy: no global graph (m=0), one graph per being
# (payload_m on the is_tenant `being_id` index), no extra graphs for the other payload
# indexes. Every search of the port is scoped to one being, so a global graph only costs
# build time, and Edge's build holds the GIL. Measured on Edge, 384 dims, one being of N plus
# 9 of N/10: optimize() 114 s instead of 458 s at N=100k, 3.6 s instead of 10 s at N=10k;
# recall@3 unchanged on clustered vectors (~1.0), and on random ones poor either way
# (0.58 vs 0.36 at 10k, 0.14 vs 0.18 at 100k; see `engram bench vectors`).
HNSW_M = 0
HNSW_PAYLOAD_M = 16
HNSW_EF_CONSTRUCT = 100  # Qdrant's default
FULL_SCAN_THRESHOLD_KB = 10_000  # Qdrant's default: below it a filtered search is exact


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"invalid collection or alias name {name!r}: use letters, digits, '_', '.', '-'")
    return name


def check_payload(payload: Mapping[str, Any]) -> int:
    """The payload's `position`; raises if `being_id` or `position` is missing or mistyped.

    Monotonic writes compare positions, so a payload without one would be a point that can
    never be updated again: refuse it at the door instead.
    """
    being = payload.get(BEING_KEY)
    if not isinstance(being, str) or not being:
        raise ValueError(f"payload needs {BEING_KEY!r} as a non-empty str, got {being!r}")
    position = payload.get(POSITION_KEY)
    # bool is an int subclass; True as a position is a bug upstream, not position 1.
    if not isinstance(position, int) or isinstance(position, bool):
        raise ValueError(f"payload needs {POSITION_KEY!r} as an int, got {position!r}")
    return position


def patch_payload(patch: PayloadPatch) -> dict[str, Any]:
    """The fields a patch sets, its position included; raises on a mistyped position, or on fields
    that would rewrite what a patch must not (the being, the position)."""
    if not isinstance(patch.position, int) or isinstance(patch.position, bool):
        raise ValueError(f"a patch needs {POSITION_KEY!r} as an int, got {patch.position!r}")
    for key in (BEING_KEY, POSITION_KEY):
        if key in patch.fields:
            raise ValueError(f"a patch cannot set {key!r}")
    return {**patch.fields, POSITION_KEY: patch.position}


def latest_per_id(items: Sequence[_Item]) -> list[_Item]:
    """One item per id, the one with the highest position (the last one on ties).

    Engines apply a batch in order, but a conditional batch is checked against the state
    before the batch: two writes to one id in a batch would both pass. Reducing first gives
    the same result as applying them one by one under the monotonic rule.
    """
    best: dict[UUID, tuple[int, _Item]] = {}
    for item in items:
        position = check_payload(item.payload)
        current = best.get(item.id)
        if current is None or position >= current[0]:
            best[item.id] = (position, item)
    return [item for _, item in best.values()]


def group_by_payload(updates: Iterable[PayloadUpdate]) -> list[tuple[Mapping[str, Any], list[UUID]]]:
    """Updates that write the same payload (hence the same position), as (payload, ids), so that one
    engine operation replaces a group's payloads. Values are told apart by type too, so `True` and `1`
    never share a group."""
    groups: dict[Any, tuple[Mapping[str, Any], list[UUID]]] = {}
    for update in updates:
        key = _payload_key(update.payload)
        group = groups.get(key)
        if group is None:
            groups[key] = (update.payload, [update.id])
        else:
            group[1].append(update.id)
    return list(groups.values())


_SCALARS = (str, int, float, bool, type(None))


def _payload_key(payload: Mapping[str, Any]) -> Any:
    if all(type(v) in _SCALARS for v in payload.values()):
        return tuple(sorted((k, type(v), v) for k, v in payload.items()))
    # A list or a dict in the payload: its JSON text, which keeps `true` and `1` apart too.
    return json.dumps(payload, sort_keys=True, default=repr)


def group_by_position(items: Iterable[_Item]) -> dict[int, list[UUID]]:
    """Ids by their new position: one filter clause per distinct position keeps conditions small."""
    groups: dict[int, list[UUID]] = defaultdict(list)
    for item in items:
        groups[check_payload(item.payload)].append(item.id)
    return dict(groups)


def as_vector(values: Any) -> Vector:
    return np.asarray(values, dtype=np.float32)


def vector_list(vector: Vector) -> list[float]:
    flat = np.asarray(vector, dtype=np.float32)
    if flat.ndim != 1:
        raise ValueError(f"expected a 1-D vector, got shape {flat.shape}")
    values: list[float] = flat.tolist()
    return values


def as_uuid(point_id: Any) -> UUID:
    # Edge hands back uuid.UUID, qdrant-client a str: normalise both.
    return point_id if isinstance(point_id, UUID) else UUID(str(point_id))
