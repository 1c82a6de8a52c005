"""Large clusters in parts for ❹ and ❻ (ADR 0041): every node owned by one part, alike nodes together,
each part overlapping the others by the nodes most like its own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.services.patrol.grouping import Part, similarity_parts

DIM = 16


def _groups(sizes: list[int], seed: int = 3) -> tuple[list[str], dict[str, np.ndarray]]:
    """Ids `g<group>-<i>`, each group's vectors near its own axis, the groups interleaved in the ids."""
    rng = np.random.default_rng(seed)
    ids, vectors = [], {}
    for i in range(max(sizes)):
        for g, size in enumerate(sizes):
            if i < size:
                v = rng.normal(0, 0.05, DIM).astype(np.float32)
                v[g] += 1.0
                ids.append(f"g{g}-{i}")
                vectors[ids[-1]] = v
    return ids, vectors


def test_a_cluster_that_fits_is_one_part() -> None:
    ids, vectors = _groups([50, 50])
    assert similarity_parts(ids, vectors, 150, 20) == [Part(ids, [])]


@pytest.mark.parametrize("sizes", [[100, 100, 100, 100], [120, 90, 60], [30, 125, 40]])
def test_alike_nodes_share_a_part_and_each_part_borrows_the_nearest_others(sizes: list[int]) -> None:
    ids, vectors = _groups(sizes)
    parts = similarity_parts(ids, vectors, 150, 20)

    assert sorted(i for p in parts for i in p.own) == sorted(ids)
    assert all(len(p.shown) <= 150 and len(p.borrowed) == 20 for p in parts)
    assert all(not set(p.own) & set(p.borrowed) for p in parts)
    for g in range(len(sizes)):  # a group of alike nodes is never cut between two parts
        assert sum(1 for p in parts if any(i.startswith(f"g{g}-") for i in p.own)) == 1


def test_the_same_nodes_give_the_same_parts() -> None:
    ids, vectors = _groups([90, 80, 70])
    assert similarity_parts(ids, vectors, 150, 20) == similarity_parts(ids, vectors, 150, 20)


def test_nodes_without_a_comparable_vector_get_parts_of_their_own() -> None:
    ids, vectors = _groups([120, 100])
    loose = [f"x{i}" for i in range(160)]
    other_model = {"y0": np.ones(DIM * 2, dtype=np.float32)}
    parts = similarity_parts([*ids, *loose, "y0"], {**vectors, **other_model}, 150, 20)

    assert sorted(i for p in parts for i in p.own) == sorted([*ids, *loose, "y0"])
    assert [p for p in parts if p.own[0].startswith(("x", "y"))] == [
        Part(loose[:150], []),
        Part([*loose[150:], "y0"], []),
    ]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=700),
    size=st.integers(min_value=4, max_value=200),
    overlap=st.integers(min_value=0, max_value=40),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_no_node_is_dropped_and_no_part_is_too_large(n: int, size: int, overlap: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = [f"n{i}" for i in range(n)]
    vectors = {i: rng.normal(size=8).astype(np.float32) for i in ids if rng.random() > 0.05}
    parts = similarity_parts(ids, vectors, size, min(overlap, size - 1))

    owned = [i for p in parts for i in p.own]
    assert sorted(owned) == sorted(ids)  # each node owned once: none dropped, none asked about twice
    assert all(0 < len(p.shown) <= size for p in parts)
    assert all(set(p.borrowed) <= set(ids) - set(p.own) for p in parts)


def test_parts_that_will_not_be_asked_borrow_nothing() -> None:
    ids, vectors = _groups([100, 100, 100])
    asked = {"g1-7"}
    parts = similarity_parts(ids, vectors, 150, 20, wanted=lambda own: not asked.isdisjoint(own))

    assert sorted(i for p in parts for i in p.own) == sorted(ids)
    [wanted] = [p for p in parts if "g1-7" in p.own]
    assert len(wanted.borrowed) == 20
    assert all(p.borrowed == [] for p in parts if p is not wanted)
