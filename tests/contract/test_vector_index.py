"""The `VectorIndex` contract: every adapter passes the same tests (see conftest's `ADAPTERS`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from engram.adapters.vectors import EdgeVectorIndex
from engram.projections.vector_index import (
    PayloadPatch,
    PayloadUpdate,
    ScoredPoint,
    SearchFilter,
    Vector,
    VectorIndex,
    VectorPoint,
)
from tests.contract.conftest import EDGE_TEST_INDEXING_THRESHOLD_KB

DIM = 16
BEING_A = UUID("aaaaaaaa-0000-4000-8000-000000000001")
BEING_B = UUID("bbbbbbbb-0000-4000-8000-000000000002")

NameFactory = Callable[[str], str]


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray[Any, np.dtype[np.float32]]:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    normed: np.ndarray[Any, np.dtype[np.float32]] = m / np.linalg.norm(m, axis=1, keepdims=True)
    return normed


def point(
    vector: Vector, being: UUID, position: int, *, pid: UUID | None = None, **extra: Any
) -> VectorPoint:
    payload: dict[str, Any] = {"being_id": str(being), "position": position, **extra}
    return VectorPoint(id=pid or uuid.uuid4(), vector=np.asarray(vector, dtype=np.float32), payload=payload)


def vec(p: ScoredPoint) -> Vector:
    assert p.vector is not None, "asked with_vectors=True"
    return p.vector


def by_id(points: Sequence[ScoredPoint]) -> dict[UUID, ScoredPoint]:
    return {p.id: p for p in points}


def cosine_top(
    matrix: np.ndarray[Any, np.dtype[np.float32]], query: Vector, k: int
) -> tuple[list[int], list[float]]:
    scores = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    order = np.argsort(-scores)[:k]
    return [int(i) for i in order], [float(scores[i]) for i in order]


@pytest.fixture
def coll(vector_index: VectorIndex, new_name: NameFactory) -> str:
    name = new_name("nodes")
    vector_index.ensure_collection(name, DIM)
    return name


# -- collections ---------------------------------------------------------------------------------


def test_ensure_collection_is_idempotent(vector_index: VectorIndex, new_name: NameFactory) -> None:
    name = new_name("c")
    assert not vector_index.collection_exists(name)
    vector_index.ensure_collection(name, DIM)
    assert vector_index.collection_exists(name)
    p = point(unit(np.random.default_rng(0), 1)[0], BEING_A, 1)
    vector_index.upsert(name, [p])

    vector_index.ensure_collection(name, DIM)

    assert vector_index.count(name) == 1
    with pytest.raises(ValueError, match="dim"):
        vector_index.ensure_collection(name, DIM * 2)


def test_drop_collection(vector_index: VectorIndex, new_name: NameFactory) -> None:
    name = new_name("c")
    vector_index.ensure_collection(name, DIM)
    vector_index.drop_collection(name)
    assert not vector_index.collection_exists(name)
    vector_index.ensure_collection(name, DIM)
    assert vector_index.count(name) == 0


def test_list_collections_names_collections_not_aliases(
    vector_index: VectorIndex, new_name: NameFactory
) -> None:
    first, second, alias = new_name("a"), new_name("b"), new_name("alias")
    for name in (first, second):
        vector_index.ensure_collection(name, DIM)
    vector_index.set_alias(alias, first)
    listed = vector_index.list_collections()
    assert {first, second} <= set(listed) and alias not in listed
    assert listed == sorted(listed)
    vector_index.drop_collection(second)
    assert second not in vector_index.list_collections()


# -- search --------------------------------------------------------------------------------------


def test_search_returns_best_first_with_cosine_scores(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(1)
    # Not unit length on purpose: the engine must normalise for cosine.
    matrix = unit(rng, 40) * rng.uniform(0.5, 3.0, size=(40, 1)).astype(np.float32)
    points = [point(v, BEING_A, i) for i, v in enumerate(matrix)]
    vector_index.upsert(coll, points)
    query = rng.standard_normal(DIM).astype(np.float32)

    hits = vector_index.search(coll, BEING_A, query, 5)

    want_idx, want_scores = cosine_top(matrix, query, 5)
    assert [h.id for h in hits] == [points[i].id for i in want_idx]
    assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-4)
    assert all(h.vector is None for h in hits)
    assert hits[0].payload == dict(points[want_idx[0]].payload)


def test_search_without_payloads_finds_the_same_points(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(11)
    matrix = unit(rng, 30)
    vector_index.upsert(coll, [point(v, BEING_A, 1, status="active") for v in matrix])
    vector_index.upsert(coll, [point(v, BEING_B, 1, status="active") for v in matrix])
    where = SearchFilter(statuses=frozenset({"active"}))
    full = vector_index.search(coll, BEING_A, matrix[0], 8, where=where)
    bare = vector_index.search(coll, BEING_A, matrix[0], 8, where=where, with_payload=False)
    assert [h.id for h in bare] == [h.id for h in full]
    assert [h.score for h in bare] == pytest.approx([h.score for h in full], abs=1e-6)
    assert all(h.payload == {} for h in bare) and all(h.payload for h in full)


def test_search_limit_and_empty(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(2)
    q = unit(rng, 1)[0]
    assert vector_index.search(coll, BEING_A, q, 3) == []
    vector_index.upsert(coll, [point(v, BEING_A, 1) for v in unit(rng, 5)])
    assert len(vector_index.search(coll, BEING_A, q, 3)) == 3
    assert len(vector_index.search(coll, BEING_A, q, 50)) == 5


def test_beings_are_isolated(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(3)
    vectors = unit(rng, 6)
    # Same vectors for both beings: only the being filter can tell them apart.
    a_points = [point(v, BEING_A, 1) for v in vectors]
    b_points = [point(v, BEING_B, 1) for v in vectors]
    vector_index.upsert(coll, a_points + b_points)

    hits_b = vector_index.search(coll, BEING_B, vectors[0], 10)
    hits_a = vector_index.search(coll, BEING_A, vectors[0], 10)

    assert {h.id for h in hits_b} == {p.id for p in b_points}
    assert {h.id for h in hits_a} == {p.id for p in a_points}
    assert all(h.payload["being_id"] == str(BEING_B) for h in hits_b)
    # A's id asked for under B reads as missing; B's own reads fine.
    assert vector_index.retrieve(coll, BEING_B, [a_points[0].id]) == []
    got = vector_index.retrieve(coll, BEING_B, [a_points[0].id, b_points[0].id])
    assert [g.id for g in got] == [b_points[0].id]
    assert vector_index.search(coll, uuid.uuid4(), vectors[0], 10) == []


def test_filters(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, 6)
    specs = [
        ("active", "c1"),
        ("active", "c2"),
        ("dormant", "c1"),
        ("dormant", "c2"),
        ("archived", "c1"),
        ("active", None),
    ]
    points = []
    for v, (status, cluster) in zip(vectors, specs, strict=True):
        extra: dict[str, Any] = {"status": status}
        if cluster is not None:
            extra["cluster_id"] = cluster
        points.append(point(v, BEING_A, 1, **extra))
    vector_index.upsert(coll, points)
    q = vectors[0]

    def ids(where: SearchFilter) -> set[UUID]:
        return {h.id for h in vector_index.search(coll, BEING_A, q, 10, where=where)}

    def pick(*idx: int) -> set[UUID]:
        return {points[i].id for i in idx}

    assert ids(SearchFilter(statuses=frozenset({"active"}))) == pick(0, 1, 5)
    assert ids(SearchFilter(statuses=frozenset({"active", "dormant"}))) == pick(0, 1, 2, 3, 5)
    assert ids(SearchFilter(cluster_ids=frozenset({"c1"}))) == pick(0, 2, 4)
    assert ids(SearchFilter(statuses=frozenset({"dormant"}), cluster_ids=frozenset({"c2"}))) == pick(3)
    assert ids(SearchFilter(exclude_ids=frozenset({points[0].id, points[3].id}))) == pick(1, 2, 4, 5)
    active_but_one = SearchFilter(statuses=frozenset({"active"}), exclude_ids=frozenset({points[1].id}))
    assert ids(active_but_one) == pick(0, 5)
    assert ids(SearchFilter(statuses=frozenset())) == set()
    assert ids(SearchFilter()) == pick(0, 1, 2, 3, 4, 5)


def test_score_threshold_keeps_scores_strictly_above(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(5)
    matrix = unit(rng, 20)
    points = [point(v, BEING_A, 1) for v in matrix]
    vector_index.upsert(coll, points)
    q = unit(rng, 1)[0]
    _, scores = cosine_top(matrix, q, 20)
    # Thresholds halfway between neighbouring scores: engines differ in the last decimals,
    # so an exact tie would test rounding, not the rule.
    for k in (1, 3, 7):
        assert scores[k - 1] - scores[k] > 1e-3, "test data needs a clear gap"
        threshold = (scores[k - 1] + scores[k]) / 2
        hits = vector_index.search(coll, BEING_A, q, 20, score_threshold=threshold)
        assert len(hits) == k
        assert all(h.score > threshold for h in hits)
    assert vector_index.search(coll, BEING_A, q, 20, score_threshold=scores[0] + 0.01) == []


def test_with_vectors_round_trip(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(6)
    vectors = unit(rng, 4)
    points = [point(v, BEING_A, 1) for v in vectors]
    vector_index.upsert(coll, points)

    hits = vector_index.search(coll, BEING_A, vectors[2], 4, with_vectors=True)
    got = vector_index.retrieve(coll, BEING_A, [p.id for p in points], with_vectors=True)

    want = {p.id: p.vector for p in points}
    for h in [*hits, *got]:
        assert vec(h).dtype == np.float32
        np.testing.assert_allclose(vec(h), want[h.id], atol=1e-6)
    assert {g.id for g in got} == set(want)
    assert all(g.score == 0.0 for g in got)
    assert all(g.vector is None for g in vector_index.retrieve(coll, BEING_A, [points[0].id]))


# -- writes --------------------------------------------------------------------------------------


def test_upsert_is_monotonic_by_position(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(7)
    v1, v2, v3, v4 = unit(rng, 4)
    pid = uuid.uuid4()
    vector_index.upsert(coll, [point(v1, BEING_A, 10, pid=pid, status="active")])

    def stored() -> ScoredPoint:
        (got,) = vector_index.retrieve(coll, BEING_A, [pid], with_vectors=True)
        return got

    # Older: ignored, vector and payload alike.
    vector_index.upsert(coll, [point(v2, BEING_A, 9, pid=pid, status="stale")])
    assert stored().payload["status"] == "active"
    assert stored().payload["position"] == 10
    np.testing.assert_allclose(vec(stored()), v1, atol=1e-6)

    # Equal: applied, so a replay after a crash rewrites the same state.
    vector_index.upsert(coll, [point(v3, BEING_A, 10, pid=pid, status="replayed")])
    assert stored().payload["status"] == "replayed"
    np.testing.assert_allclose(vec(stored()), v3, atol=1e-6)

    # Newer: applied.
    vector_index.upsert(coll, [point(v4, BEING_A, 11, pid=pid, status="dormant")])
    assert stored().payload == {"being_id": str(BEING_A), "position": 11, "status": "dormant"}
    np.testing.assert_allclose(vec(stored()), v4, atol=1e-6)
    assert vector_index.count(coll) == 1


def test_upsert_batch_mixes_old_new_and_missing_points(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(8)
    vs = unit(rng, 8)
    old, new, fresh = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    vector_index.upsert(coll, [point(vs[0], BEING_A, 5, pid=old), point(vs[1], BEING_A, 5, pid=new)])

    vector_index.upsert(
        coll,
        [
            point(vs[2], BEING_A, 4, pid=old, tag="x"),
            point(vs[3], BEING_A, 6, pid=new, tag="y"),
            point(vs[4], BEING_A, 1, pid=fresh, tag="z"),
            # Two writes to one id in a batch: the newer wins, whatever the order.
            point(vs[5], BEING_A, 8, pid=new, tag="newest"),
            point(vs[6], BEING_A, 7, pid=new, tag="middle"),
        ],
    )

    got = by_id(vector_index.retrieve(coll, BEING_A, [old, new, fresh]))
    assert "tag" not in got[old].payload
    assert got[old].payload["position"] == 5
    assert got[new].payload["tag"] == "newest"
    assert got[fresh].payload["tag"] == "z"
    assert vector_index.count(coll) == 3


def test_set_payloads_is_monotonic_and_keeps_the_vector(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(9)
    v = unit(rng, 1)[0]
    pid, other, missing = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    vector_index.upsert(
        coll, [point(v, BEING_A, 10, pid=pid, status="active", extra=1), point(v, BEING_A, 3, pid=other)]
    )

    def payload(p: UUID) -> Mapping[str, Any]:
        return vector_index.retrieve(coll, BEING_A, [p])[0].payload

    base = {"being_id": str(BEING_A)}
    vector_index.set_payloads(coll, [PayloadUpdate(pid, {**base, "position": 9, "status": "stale"})])
    assert payload(pid)["status"] == "active"

    vector_index.set_payloads(coll, [PayloadUpdate(pid, {**base, "position": 10, "status": "replayed"})])
    # The whole payload is replaced: `extra` is gone.
    assert payload(pid) == {**base, "position": 10, "status": "replayed"}

    vector_index.set_payloads(
        coll,
        [
            PayloadUpdate(pid, {**base, "position": 12, "status": "dormant"}),
            PayloadUpdate(other, {**base, "position": 2, "status": "stale"}),
            PayloadUpdate(missing, {**base, "position": 99, "status": "ghost"}),
        ],
    )
    assert payload(pid) == {**base, "position": 12, "status": "dormant"}
    assert "status" not in payload(other)
    assert vector_index.retrieve(coll, BEING_A, [missing]) == []
    assert vector_index.count(coll) == 2
    (hit,) = vector_index.retrieve(coll, BEING_A, [pid], with_vectors=True)
    np.testing.assert_allclose(vec(hit), v, atol=1e-6)


def test_set_payloads_groups_equal_payloads_and_keeps_each_point_monotonic(
    vector_index: VectorIndex, coll: str
) -> None:
    """Adapters write equal payloads with one operation: every point of a group still gets the
    monotonic rule on its own, and payloads that differ only by type (`True`, `1`) are not equal."""
    vs = unit(np.random.default_rng(15), 6)
    ids = [uuid.uuid4() for _ in vs]
    stored_at = [3, 3, 12, 3, 3, 3]  # ids[2] holds a newer state than the batch
    vector_index.upsert(
        coll, [point(v, BEING_A, p, pid=i) for v, p, i in zip(vs, stored_at, ids, strict=True)]
    )
    missing = uuid.uuid4()
    base = {"being_id": str(BEING_A), "position": 10}
    dying, flag_true, flag_one = {**base, "status": "dying"}, {**base, "flag": True}, {**base, "flag": 1}

    vector_index.set_payloads(
        coll,
        [
            *(PayloadUpdate(i, dying) for i in (ids[0], ids[1], ids[2], missing)),
            PayloadUpdate(ids[3], flag_true),
            PayloadUpdate(ids[4], flag_one),
            PayloadUpdate(ids[5], {**base, "position": 2, "status": "older"}),
        ],
    )

    got = by_id(vector_index.retrieve(coll, BEING_A, ids))
    assert got[ids[0]].payload == got[ids[1]].payload == dying
    assert got[ids[2]].payload == {"being_id": str(BEING_A), "position": 12}
    assert got[ids[3]].payload == flag_true and got[ids[3]].payload["flag"] is True
    assert got[ids[4]].payload == flag_one and type(got[ids[4]].payload["flag"]) is int
    assert got[ids[5]].payload == {"being_id": str(BEING_A), "position": 3}
    assert vector_index.retrieve(coll, BEING_A, [missing]) == []
    assert vector_index.count(coll) == len(ids)


def test_patch_payloads_sets_fields_monotonically_and_keeps_the_rest(
    vector_index: VectorIndex, coll: str
) -> None:
    vs = unit(np.random.default_rng(16), 5)
    ids = [uuid.uuid4() for _ in vs]
    stored_at = [3, 3, 12, 3, 10]  # ids[2] holds a newer state than the patches; ids[4] the same
    vector_index.upsert(
        coll,
        [
            point(v, BEING_A, p, pid=i, status="active", cluster="c1", extra=7)
            for v, p, i in zip(vs, stored_at, ids, strict=True)
        ],
    )
    missing = uuid.uuid4()

    def payload(p: UUID) -> Mapping[str, Any]:
        return vector_index.retrieve(coll, BEING_A, [p])[0].payload

    vector_index.patch_payloads(
        coll,
        [
            # One patch for many points: each point is held to the monotonic rule on its own.
            PayloadPatch([ids[0], ids[1], ids[2], ids[4], missing], {"status": "dying"}, 10),
            # Applied in order: a later patch sees what the earlier one wrote.
            PayloadPatch([ids[1]], {"cluster": "c2", "status": "dead"}, 10),
            PayloadPatch([ids[3]], {"status": "stale"}, 2),
        ],
    )

    kept = {"being_id": str(BEING_A), "extra": 7}
    assert payload(ids[0]) == {**kept, "status": "dying", "cluster": "c1", "position": 10}
    assert payload(ids[1]) == {**kept, "status": "dead", "cluster": "c2", "position": 10}
    assert payload(ids[2]) == {**kept, "status": "active", "cluster": "c1", "position": 12}
    assert payload(ids[3]) == {**kept, "status": "active", "cluster": "c1", "position": 3}
    assert payload(ids[4]) == {**kept, "status": "dying", "cluster": "c1", "position": 10}  # equal: replayed
    assert vector_index.retrieve(coll, BEING_A, [missing]) == []
    assert vector_index.count(coll) == len(ids)
    for i, v in zip(ids, vs, strict=True):
        (hit,) = vector_index.retrieve(coll, BEING_A, [i], with_vectors=True)
        np.testing.assert_allclose(vec(hit), v, atol=1e-6)


def test_patch_payloads_refuses_what_a_patch_must_not_write(vector_index: VectorIndex, coll: str) -> None:
    v = unit(np.random.default_rng(17), 1)[0]
    pid = uuid.uuid4()
    vector_index.upsert(coll, [point(v, BEING_A, 1, pid=pid, status="active")])
    for bad in (
        PayloadPatch([pid], {"status": "x"}, True),
        PayloadPatch([pid], {"status": "x"}, "2"),  # type: ignore[arg-type]
        PayloadPatch([pid], {"being_id": str(BEING_B)}, 2),
        PayloadPatch([pid], {"position": 5}, 2),
    ):
        with pytest.raises(ValueError, match=r"position|being_id"):
            # A bad patch after a good one: nothing of the call is written.
            vector_index.patch_payloads(coll, [PayloadPatch([pid], {"status": "dying"}, 2), bad])
    assert vector_index.retrieve(coll, BEING_A, [pid])[0].payload == {
        "being_id": str(BEING_A),
        "position": 1,
        "status": "active",
    }
    vector_index.patch_payloads(coll, [])
    vector_index.patch_payloads(coll, [PayloadPatch([], {"status": "x"}, 9)])
    assert vector_index.retrieve(coll, BEING_A, [pid])[0].payload["position"] == 1


def test_writes_need_being_and_position(vector_index: VectorIndex, coll: str) -> None:
    v = unit(np.random.default_rng(10), 1)[0]
    with pytest.raises(ValueError, match="position"):
        vector_index.upsert(coll, [VectorPoint(uuid.uuid4(), v, {"being_id": str(BEING_A)})])
    with pytest.raises(ValueError, match="being_id"):
        vector_index.upsert(coll, [VectorPoint(uuid.uuid4(), v, {"position": 1})])
    with pytest.raises(ValueError, match="position"):
        vector_index.set_payloads(coll, [PayloadUpdate(uuid.uuid4(), {"being_id": str(BEING_A)})])
    assert vector_index.count(coll) == 0


def test_empty_writes_are_no_ops(vector_index: VectorIndex, coll: str) -> None:
    vector_index.upsert(coll, [])
    vector_index.set_payloads(coll, [])
    vector_index.delete(coll, [])
    assert vector_index.retrieve(coll, BEING_A, []) == []
    assert vector_index.count(coll) == 0


def test_delete(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(11)
    vectors = unit(rng, 3)
    points = [point(v, BEING_A, 1) for v in vectors]
    vector_index.upsert(coll, points)

    vector_index.delete(coll, [points[0].id, uuid.uuid4()])

    assert vector_index.retrieve(coll, BEING_A, [points[0].id]) == []
    assert points[0].id not in {h.id for h in vector_index.search(coll, BEING_A, vectors[0], 10)}
    assert vector_index.count(coll) == 2


def test_count_per_being_and_total(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(12)
    vector_index.upsert(coll, [point(v, BEING_A, 1) for v in unit(rng, 7)])
    vector_index.upsert(coll, [point(v, BEING_B, 1) for v in unit(rng, 4)])
    assert vector_index.count(coll, BEING_A) == 7
    assert vector_index.count(coll, BEING_B) == 4
    assert vector_index.count(coll, uuid.uuid4()) == 0
    assert vector_index.count(coll) == 11


# -- aliases -------------------------------------------------------------------------------------


def test_aliases_switch_atomically(vector_index: VectorIndex, new_name: NameFactory) -> None:
    rng = np.random.default_rng(13)
    old, new, alias = new_name("v1"), new_name("v2"), new_name("live")
    vector_index.ensure_collection(old, DIM)
    vector_index.ensure_collection(new, DIM)
    vec = unit(rng, 1)[0]
    in_old = point(vec, BEING_A, 1)
    in_new = point(vec, BEING_A, 1)
    vector_index.upsert(old, [in_old])
    assert vector_index.resolve_alias(alias) is None

    vector_index.set_alias(alias, old)
    assert vector_index.resolve_alias(alias) == old
    assert vector_index.collection_exists(alias)
    assert [h.id for h in vector_index.search(alias, BEING_A, vec, 5)] == [in_old.id]

    # A rebuild fills the new collection through its own name, then switches the alias.
    vector_index.upsert(new, [in_new])
    vector_index.set_alias(alias, new)
    assert vector_index.resolve_alias(alias) == new
    assert [h.id for h in vector_index.search(alias, BEING_A, vec, 5)] == [in_new.id]
    assert vector_index.count(alias) == 1

    # Every call takes the alias: writes land in the collection it points at.
    extra = point(vec, BEING_A, 2)
    vector_index.upsert(alias, [extra])
    vector_index.set_payloads(alias, [PayloadUpdate(extra.id, {**extra.payload, "status": "s"})])
    assert vector_index.retrieve(new, BEING_A, [extra.id])[0].payload["status"] == "s"
    assert vector_index.count(old) == 1
    vector_index.ensure_collection(alias, DIM)  # idempotent through the alias too
    vector_index.delete(alias, [extra.id])
    assert vector_index.count(new) == 1

    # An alias does not outlive its collection.
    vector_index.drop_collection(new)
    assert vector_index.resolve_alias(alias) is None
    assert vector_index.collection_exists(old)


def test_set_alias_needs_an_existing_collection(vector_index: VectorIndex, new_name: NameFactory) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        vector_index.set_alias(new_name("live"), new_name("nothing"))


# -- maintenance ---------------------------------------------------------------------------------


def test_optimize_keeps_search_correct(vector_index: VectorIndex, coll: str) -> None:
    rng = np.random.default_rng(14)
    matrix = unit(rng, 300)
    points = [point(v, BEING_A if i % 3 else BEING_B, i) for i, v in enumerate(matrix)]
    vector_index.upsert(coll, points)

    vector_index.optimize(coll)

    mine = [i for i in range(len(points)) if i % 3]
    q = unit(rng, 1)[0]
    want_idx, want_scores = cosine_top(matrix[mine], q, 5)
    hits = vector_index.search(coll, BEING_A, q, 5)
    assert [h.id for h in hits] == [points[mine[i]].id for i in want_idx]
    assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-4)
    # Writes after the index build still land and are found.
    late = point(q, BEING_A, 1000)
    vector_index.upsert(coll, [late])
    assert vector_index.search(coll, BEING_A, q, 1)[0].id == late.id
    assert vector_index.count(coll) == 301


# -- Edge only -----------------------------------------------------------------------------------


def test_edge_reopen_keeps_points_and_aliases(tmp_path: Path) -> None:
    rng = np.random.default_rng(15)
    root = tmp_path / "vectors"
    first = EdgeVectorIndex(root, indexing_threshold_kb=EDGE_TEST_INDEXING_THRESHOLD_KB)
    first.ensure_collection("nodes_v1", DIM)
    points = [point(v, BEING_A, i) for i, v in enumerate(unit(rng, 30))]
    first.upsert("nodes_v1", points)
    first.set_payloads("nodes_v1", [PayloadUpdate(points[0].id, {**points[0].payload, "status": "s"})])
    first.set_alias("nodes", "nodes_v1")
    first.optimize("nodes")
    first.close()

    second = EdgeVectorIndex(root)
    try:
        assert second.resolve_alias("nodes") == "nodes_v1"
        assert second.collection_exists("nodes")
        assert second.count("nodes", BEING_A) == 30
        assert second.retrieve("nodes", BEING_A, [points[0].id])[0].payload["status"] == "s"
        hits = second.search("nodes", BEING_A, points[7].vector, 1)
        assert hits[0].id == points[7].id
        assert hits[0].score == pytest.approx(1.0, abs=1e-4)
        # Payload indexes survive too: ensure_collection finds them and does not fail.
        second.ensure_collection("nodes", DIM)
    finally:
        second.close()
    third = EdgeVectorIndex(root)
    try:
        with pytest.raises(ValueError, match="dim"):
            third.ensure_collection("nodes", DIM * 2)
    finally:
        third.close()


def test_edge_opens_each_shard_with_its_search_threads_and_finds_the_same(tmp_path: Path) -> None:
    """The pool that searches a shard's segments is set at every open, also of a shard opened by
    name only (its size read from disk), and does not change what a search finds (ADR 0019)."""
    rng = np.random.default_rng(16)
    root = tmp_path / "vectors"
    first = EdgeVectorIndex(root, indexing_threshold_kb=EDGE_TEST_INDEXING_THRESHOLD_KB, search_threads=3)
    first.ensure_collection("nodes_v1", DIM)
    points = [point(v, BEING_A, i) for i, v in enumerate(unit(rng, 60))]
    first.upsert("nodes_v1", points[:40])
    first.optimize("nodes_v1")  # an indexed segment, then an appendable one: a search reads both
    first.upsert("nodes_v1", points[40:])
    queries = unit(rng, 5)
    before = [[h.id for h in first.search("nodes_v1", BEING_A, q, 10)] for q in queries]
    stored = json.loads((root / "collections" / "nodes_v1" / "edge_config.json").read_text())
    assert stored["max_search_threads"] == 3
    first.close()

    second = EdgeVectorIndex(root)  # the default: one thread
    try:
        assert second.count("nodes_v1", BEING_A) == 60  # opened by name, without ensure_collection
        stored = json.loads((root / "collections" / "nodes_v1" / "edge_config.json").read_text())
        assert stored["max_search_threads"] == 1
        assert [[h.id for h in second.search("nodes_v1", BEING_A, q, 10)] for q in queries] == before
    finally:
        second.close()


def test_edge_sees_an_alias_switched_by_another_instance(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    writer = EdgeVectorIndex(root)
    reader = EdgeVectorIndex(root)
    try:
        writer.ensure_collection("a", DIM)
        writer.ensure_collection("b", DIM)
        writer.set_alias("live", "a")
        assert reader.resolve_alias("live") == "a"
        writer.set_alias("live", "b")
        assert reader.resolve_alias("live") == "b"
        assert not list(root.glob(".aliases.*.tmp"))
    finally:
        writer.close()
        reader.close()


def test_edge_rejects_unsafe_names(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "vectors")
    try:
        for bad in ("../escape", "a/b", "", ".hidden"):
            with pytest.raises(ValueError, match="invalid"):
                index.ensure_collection(bad, DIM)
        with pytest.raises(KeyError):
            index.count("missing")
    finally:
        index.close()
