"""The pieces of `query`'s default ranking (ADR 0008): dates, names, scaled fusion, neighbours."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.projections.ranking_cache import BeingRanking
from engram.services.query_text import (
    first_date,
    is_question,
    node_dates,
    query_dates,
    strip_words,
)
from engram.services.ranking import PROFILES, best_of, combine, date_closeness, rank, spread_to_neighbours

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def row(
    seq: int | None,
    day: str = "2023-05-08",
    action: str = "x",
    importance: float = 0.5,
    actors: str = "",
) -> dict[str, Any]:
    """A memory view row with the columns the ranking copy reads (see `ranked`)."""
    return {
        "seq": seq,
        "status": "active",
        "importance": importance,
        "last_activated_at": NOW.isoformat(),
        "when_json": json.dumps([day]),
        "asks": is_question(action),
        "actors": actors,
    }


def ranked(rows: dict[str, dict[str, Any]]) -> tuple[BeingRanking, dict[str, int]]:
    """A being's ranking copy holding `rows` (by id), and their slots."""
    ranking = BeingRanking("nodes", 0, ["active", "dying", "dead"])
    assert ranking.apply(sorted(({"id": i, **r} for i, r in rows.items()), key=lambda r: r["seq"]))
    return ranking, ranking.slots(rows)


def test_dates_a_query_names() -> None:
    day = dt.date(2023, 10, 13)
    assert query_dates("What did she show on October 13, 2023?") == [(day, day)]
    assert query_dates("on 13th of Oct 2023") == [(day, day)]
    assert query_dates("since 2023-10-13") == [(day, day)]
    assert query_dates("in May 2023") == [(dt.date(2023, 5, 1), dt.date(2023, 5, 31))]
    assert query_dates("May I ask what happened last week in 2023?") == []
    assert query_dates("on 31 February 2023") == [(dt.date(2023, 2, 1), dt.date(2023, 2, 28))]  # the month


def test_date_closeness_and_node_dates() -> None:
    may = [(dt.date(2023, 5, 1), dt.date(2023, 5, 31))]
    assert date_closeness(may, [dt.date(2023, 5, 20)], 3.0) == 1.0
    assert date_closeness(may, [dt.date(2023, 6, 3)], 3.0) == pytest.approx(2.718281828**-1)
    assert date_closeness([], [dt.date(2023, 6, 3)], 3.0) == 0.0
    when = ["2023-05-08", {"date": "Day7", "action": "a"}, {"date": "2023-06-01", "action": "b"}]
    assert node_dates(when) == [dt.date(2023, 5, 8), dt.date(2023, 6, 1)]
    assert first_date(when) == "2023-05-08" and first_date([]) is None


def test_names_leave_the_semantic_query() -> None:
    assert strip_words("What does Caroline's drawing mean?", {"caroline"}) == "What does drawing mean?"
    assert strip_words("Mina and Lena", {"mina", "lena"}) == "and"
    assert strip_words("Mina", {"mina"}) == "Mina"  # nothing left: the query stays as it was
    assert strip_words("Caroline", set()) == "Caroline"
    assert is_question("What did you paint?") and not is_question("I painted a sunrise.")


def test_scaled_fusion_arithmetic() -> None:
    p = dataclasses.replace(PROFILES["default"], importance=0.0)
    ranking, slots = ranked({"a": row(1), "b": row(2), "c": row(3)})
    scores = combine(p, [("a", 0.9), ("b", 0.5), ("c", 0.4)], [("b", 4.0), ("c", 2.0)], ranking, slots, NOW)
    # lexical (score / best)²; semantic min-max over the semantic candidates, weight 0.5
    assert scores["a"] == pytest.approx(0.5 * 1.0)
    assert scores["b"] == pytest.approx(1.0 + 0.5 * 0.2)
    assert scores["c"] == pytest.approx(0.25 + 0.0)
    ranking, slots = ranked({"a": row(1, "2023-05-09")})
    dated = combine(p, [], [("a", 1.0)], ranking, slots, NOW, query_dates("on 8 May 2023"))
    assert dated["a"] == pytest.approx(1.0 + 0.4 * 2.718281828 ** (-1 / 3))


def test_neighbours_share_by_order_day_and_questions() -> None:
    p = PROFILES["default"]  # 0.3 each way, 0.8 forward from a question, a third per further step
    ranking, slots = ranked(
        {
            "q": row(10, action="What does it mean to you?"),
            "answer": row(20),
            "next": row(30),
            "before": row(5),
            "other-day": row(40, day="2023-05-09"),
            "seed": row(50, day="2023-05-09"),
            "after-seed": row(60, day="2023-05-09"),
        }
    )
    scores = {
        "q": 1.0,
        "answer": 0.0,
        "next": 0.0,
        "before": 0.0,
        "other-day": 0.0,
        "seed": 0.5,
        "after-seed": 0.0,
    }
    out = spread_to_neighbours(p, scores, ranking, slots, ["q", "seed"])
    assert out["answer"] == pytest.approx(0.8)  # the question's answer, one step forward
    assert out["next"] == pytest.approx(0.8 / 3)
    assert out["before"] == pytest.approx(0.3)
    assert out["other-day"] == pytest.approx(0.3 * 0.5)  # from `seed` (same day), not from `q`
    assert out["after-seed"] == pytest.approx(0.3 * 0.5)
    assert out["q"] == 1.0 and out["seed"] == 0.5
    # A memory takes the best offer, not the sum of them.
    ranking, slots = ranked({"a": row(1), "m": row(2), "b": row(3)})
    both = spread_to_neighbours(p, {"a": 1.0, "m": 0.0, "b": 1.0}, ranking, slots, ["a", "b"])
    assert both["m"] == pytest.approx(0.3)


@given(
    st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3),
        st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(-1e6, 1e6, allow_nan=False)),
        max_size=60,
    ),
    st.integers(0, 70),
)
def test_best_of_is_the_sorted_cut(scores: dict[str, float], k: int) -> None:
    """`best_of` sorts only what can make the cut, and gives what sorting everything gives: ties
    (many, from the sampled scores) broken by id."""
    assert best_of(scores, k) == sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def test_the_default_profile_scores_by_its_formula() -> None:
    """`combine` for the default profile (scaled fusion, no dates in the query): lexical weight x
    (bm25 / best bm25) ^ power + semantic weight x the similarity scaled to [0, 1] over the query's
    candidates + importance weight x importance; nodes outside a channel get nothing from it."""
    ranking = BeingRanking("t", 1, ["active", "dying", "dead"])
    rows = [
        {
            "id": f"n{i}",
            "seq": i,
            "status": "active",
            "importance": 0.1 * (i % 7),
            "last_activated_at": None,
            "when_json": '["2026-05-01"]',
            "asks": 0,
        }
        for i in range(40)
    ]
    assert ranking.apply(rows)
    semantic = [(f"n{i}", 0.9 - 0.01 * i) for i in range(0, 40, 2)]
    lexical = [(f"n{i}", 12.0 / (1 + i)) for i in range(0, 40, 3)]
    slots = ranking.slots([*(i for i, _ in semantic), *(i for i, _ in lexical)])
    p = PROFILES["default"]
    scores = combine(p, semantic, lexical, ranking, slots, dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    sem, lex = dict(semantic), dict(lexical)
    hi, lo, top = max(sem.values()), min(sem.values()), max(lex.values())
    for node_id, slot in slots.items():
        expected = 0.0
        if node_id in lex:
            expected += p.lexical * (lex[node_id] / top) ** p.lexical_power
        if node_id in sem:
            expected += p.semantic * (sem[node_id] - lo) / (hi - lo)
        expected += p.importance * ranking.importance[slot]
        assert scores[node_id] == pytest.approx(expected, rel=1e-12), node_id
    assert set(scores) == set(slots)


def test_a_named_speaker_adds_the_speaker_weight_after_the_neighbours() -> None:
    """A memory whose actors include one the query names gains `speaker` (ADR 0082), added after the
    neighbours' shares: the other actor's reply next to it gains only the share of its plain score."""
    p = dataclasses.replace(
        PROFILES["default"], importance=0.0, dates=0.0, speaker=0.8, question_penalty=0.0, answers=0.0
    )
    ranking, _ = ranked(
        {
            "said": row(1, actors="Caroline"),
            "reply": row(2, actors="Melanie"),
            "both": row(10, day="2023-06-01", actors="Mel Caroline"),
            "other": row(20, day="2023-07-01", actors="Melanie"),
        }
    )
    lexical = [("said", 1.0), ("both", 1.0), ("other", 1.0)]

    def scores(actors: set[str]) -> dict[str, float]:
        found = rank(p, ranking, [], lexical, text="q", k=10, statuses=["active"], now=NOW, actors=actors)
        return dict(found)

    named = scores({"Caroline"})
    assert named["said"] == pytest.approx(1.0 + 0.8)
    assert named["both"] == pytest.approx(1.0 + 0.8)
    assert named["other"] == pytest.approx(1.0)
    assert named["reply"] == pytest.approx(0.3 * 1.0)  # its neighbour's share, not of the 0.8
    assert scores(set()) == {"said": 1.0, "both": 1.0, "other": 1.0, "reply": pytest.approx(0.3)}
    unweighted = dataclasses.replace(p, speaker=0.0)
    plain = rank(
        unweighted, ranking, [], lexical, text="q", k=10, statuses=["active"], now=NOW, actors={"caroline"}
    )
    assert dict(plain)["said"] == pytest.approx(1.0)
