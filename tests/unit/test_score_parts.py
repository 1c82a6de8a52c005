"""A `query` hit's score broken down by its parts (`services/score_parts.py`): for every profile the
parts add up to the score `rank` gave, and each part is the profile's weight times its signal."""

from __future__ import annotations

import datetime as dt

import pytest

from engram.projections.ranking_cache import BeingRanking
from engram.services.query_text import is_question
from engram.services.ranking import PROFILES, rank
from engram.services.score_parts import PARTS, parts

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
TEXT = "What happened on 8 May 2026?"


def _ranking() -> BeingRanking:
    ranking = BeingRanking("t", 1, ["active", "dying", "dead"])
    rows = [
        {
            "id": f"n{i}",
            "seq": i,
            "status": "active",
            "importance": 0.1 * (i % 7),
            "last_activated_at": f"2026-05-{1 + i % 28:02d}T10:00:00+00:00",
            "when_json": f'["2026-05-{1 + (i // 4) % 10:02d}"]',  # four memories a day,
            "asks": is_question("Why?" if i % 5 == 0 else "It rained."),
        }
        for i in range(40)
    ]
    assert ranking.apply(rows)
    return ranking


SEMANTIC = [(f"n{i}", 0.9 - 0.01 * i) for i in range(0, 40, 2)]
LEXICAL = [(f"n{i}", 12.0 / (1 + i)) for i in range(0, 40, 3)]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_parts_of_each_hit_add_up_to_its_score(name: str) -> None:
    p, ranking = PROFILES[name], _ranking()
    hits = rank(p, ranking, SEMANTIC, LEXICAL, text=TEXT, k=15, statuses=["active"], now=NOW)
    found = parts(p, ranking, SEMANTIC, LEXICAL, hits, text=TEXT, now=NOW)
    assert set(found) == {i for i, _ in hits}
    for node_id, score in hits:
        assert set(found[node_id]) <= set(PARTS)
        assert sum(found[node_id].values()) == pytest.approx(score, rel=1e-9, abs=1e-12), node_id


def test_each_part_is_its_weight_times_its_signal() -> None:
    p, ranking = PROFILES["spec-001"], _ranking()
    hits = rank(p, ranking, SEMANTIC, LEXICAL, text="rain", k=40, statuses=["active"], now=NOW)
    found = parts(p, ranking, SEMANTIC, LEXICAL, hits, text="rain", now=NOW)
    n0 = found["n0"]  # in both channels: the best of each
    assert n0["semantic"] == pytest.approx(0.50 * 0.9)
    assert n0["lexical"] == pytest.approx(0.28 * 1.0)
    assert n0["channel"] == pytest.approx(0.05 * 0.25)
    assert "importance" not in n0  # importance 0: a part that is 0 is left out
    # n6: importance 0.6, last activated 2026-05-07 10:00, 24.58 days before NOW
    age = (NOW - dt.datetime(2026, 5, 7, 10, tzinfo=dt.UTC)).total_seconds() / 86400
    assert found["n6"]["importance"] == pytest.approx(0.10 * 0.6)
    assert found["n6"]["recency"] == pytest.approx(0.07 / (1 + age / 45))


def test_default_profile_names_dates_neighbours_and_question_penalty() -> None:
    p, ranking = PROFILES["default"], _ranking()
    hits = rank(p, ranking, SEMANTIC, LEXICAL, text=TEXT, k=40, statuses=["active"], now=NOW)
    found = parts(p, ranking, SEMANTIC, LEXICAL, hits, text=TEXT, now=NOW)
    assert found["n28"]["dates"] == pytest.approx(0.4)  # its day is 2026-05-08, the one the query names
    assert any("neighbours" in f for f in found.values())  # memories next to the best got a share
    assert found["n0"]["question"] < 0  # n0 asks: it keeps 0.9 of its score


def test_the_speaker_weight_is_a_part_of_its_own() -> None:
    """A memory of an actor the query names gains the default profile's speaker weight (ADR 0082):
    the breakdown shows it as `speaker`, not folded into the neighbours' share."""
    p, ranking = PROFILES["default"], BeingRanking("t", 1, ["active"])
    rows = [
        {
            "id": f"n{i}",
            "seq": i,
            "status": "active",
            "importance": 0.2,
            "actors": actors,
            "asks": False,
            "last_activated_at": "2026-05-01T10:00:00+00:00",
            "when_json": "[]",
        }
        for i, actors in enumerate(["me Mina", "me Leo"])
    ]
    assert ranking.apply(rows)
    semantic = [("n0", 0.5), ("n1", 0.5)]
    text = "what did Mina say"
    hits = rank(p, ranking, semantic, [], text=text, k=2, statuses=["active"], now=NOW, actors={"mina"})
    found = parts(p, ranking, semantic, [], hits, text=text, now=NOW, actors={"mina"})
    assert found["n0"]["speaker"] == p.speaker and "speaker" not in found["n1"]
    assert sum(found["n0"].values()) == pytest.approx(dict(hits)["n0"], rel=1e-9)
