"""The opening weight of `query`'s default ranking (ADR 0090): the memory noted first on its day —
the one after a memory of another day, in the order of noting — gains `opening`."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.services.ranking import PROFILES, Profile, opens_day, rank
from engram.services.score_parts import parts
from tests.unit.test_query_ranking import NOW, ranked, row


def _plain(opening: float = 0.0) -> Profile:
    return dataclasses.replace(
        PROFILES["default"],
        importance=0.0,
        dates=0.0,
        neighbours=0.0,
        answers=0.0,
        question_penalty=0.0,
        speaker=0.0,
        opening=opening,
    )


def test_the_first_memory_of_each_day_opens_it() -> None:
    ranking, slots = ranked(
        {
            "a1": row(1, day="2023-05-08"),
            "a2": row(2, day="2023-05-08"),
            "b1": row(3, day="2023-05-09"),
            "b2": row(4, day="2023-05-09"),
            "c1": row(5, day="2023-05-08"),  # back to an earlier day after another: a new sitting
        }
    )
    opens = {i: opens_day(ranking, s) for i, s in slots.items()}
    assert opens == {"a1": True, "a2": False, "b1": True, "b2": False, "c1": True}


def test_a_memory_without_seq_opens_nothing() -> None:
    ranking, slots = ranked({"a": row(1), "b": row(2)})
    assert opens_day(ranking, slots["a"]) and not opens_day(ranking, slots["b"])
    assert ranking.apply(
        [{"id": "old", **row(None, day="2023-06-01")}, {"id": "c", **row(3, day="2023-06-01")}]
    )
    assert not opens_day(ranking, ranking.slot["old"])
    assert opens_day(ranking, ranking.slot["c"])  # the memory before it with a seq is of another day


def test_an_opening_memory_gains_the_opening_weight() -> None:
    ranking, _ = ranked(
        {
            "first": row(1, day="2023-05-08"),
            "second": row(2, day="2023-05-08"),
            "next day": row(3, day="2023-05-09"),
        }
    )
    lexical = [("first", 1.0), ("second", 1.0), ("next day", 0.5)]

    def scores(weight: float) -> dict[str, float]:
        p = _plain(opening=weight)
        return dict(rank(p, ranking, [], lexical, text="q", k=10, statuses=["active"], now=NOW))

    assert scores(0.0) == {"first": 1.0, "second": 1.0, "next day": pytest.approx(0.25)}
    weighted = scores(0.2)
    assert weighted == {"first": pytest.approx(1.2), "second": 1.0, "next day": pytest.approx(0.45)}
    assert PROFILES["default"].opening == 0.2
    assert all(p.opening == 0.0 for name, p in PROFILES.items() if name != "default")


def test_the_opening_weight_is_a_part_of_its_own() -> None:
    ranking, _ = ranked({"first": row(1), "second": row(2)})
    p = _plain(opening=0.2)
    lexical = [("first", 1.0), ("second", 1.0)]
    hits = rank(p, ranking, [], lexical, text="q", k=10, statuses=["active"], now=NOW)
    found = parts(p, ranking, [], lexical, hits, text="q", now=NOW)
    assert found["first"]["opening"] == pytest.approx(0.2)
    assert "opening" not in found["second"]
    for node_id, total in hits:
        assert sum(found[node_id].values()) == pytest.approx(total)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.floats(0.0, 3.0, allow_nan=False)),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 12),
    st.sampled_from([0.0, 0.1, 0.5]),
)
def test_looking_only_at_the_possible_k_best_changes_nothing(
    memories: list[tuple[int, bool, float]], k: int, penalty: float
) -> None:
    """`rank` looks for openers only among the memories that could reach the k best; the k best are
    those of adding the weight to every opener (before a question's penalty)."""
    rows = {
        f"n{n:02}": row(n, day=f"2023-05-0{day + 1}", action="what?" if asks else "x")
        for n, (day, asks, _) in enumerate(memories)
    }
    ranking, slots = ranked(rows)
    lexical = sorted(((f"n{n:02}", s) for n, (_, _, s) in enumerate(memories)), key=lambda kv: -kv[1])
    p = dataclasses.replace(_plain(0.3), question_penalty=penalty)
    plain = dict(
        rank(
            dataclasses.replace(p, opening=0.0),
            ranking,
            [],
            lexical,
            text="q",
            k=999,
            statuses=["active"],
            now=NOW,
        )
    )
    keep = 1 - penalty
    expected = {
        i: s + (0.3 * (keep if ranking.asks[slots[i]] else 1.0) if opens_day(ranking, slots[i]) else 0.0)
        for i, s in plain.items()
    }
    found = rank(p, ranking, [], lexical, text="q", k=k, statuses=["active"], now=NOW)
    want = sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    assert [s for _, s in found] == pytest.approx([s for _, s in want])
    cut = want[-1][1]
    assert {i for i, s in found if s > cut + 1e-9} == {i for i, s in want if s > cut + 1e-9}
