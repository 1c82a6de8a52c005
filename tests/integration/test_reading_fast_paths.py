"""`query`'s faster paths give what the straightforward ones gave (SQLite's full-text index).

- `lexical` ranks the top rows inside FTS5 and joins only those: the same hits and scores as
  joining every match and sorting (only rows tied on bm25 across the cut may be picked differently),
  also when many of the best matches have another status (it asks for more);
- `actor_terms` in one statement finds the same names as one look-up per word;
- names are marked terms in the index (ADR 0014): bm25 and `actor_terms` agree with an index of the
  rows as stored, where names are found with a column filter;
- `recall(vector=…)` searches with the given vector and never calls the embedder.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest

from engram.adapters.fulltext import fts5_ranking
from engram.adapters.fulltext.fts5_ranking import FTS_WEIGHTS
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode
from engram.domain.scene import SceneInput
from engram.projections import engine
from engram.projections.fulltext.port import FTS_COLUMNS
from engram.projections.fulltext.terms import STOPWORDS, query_terms
from engram.projections.ranking_cache import BeingRanking
from engram.services.bootstrap import Engram
from engram.services.query_text import first_date
from engram.services.ranking import _day
from engram.services.reading import Reading

WORDS = [
    "garden",
    "tomatoes",
    "climbing",
    "river",
    "bread",
    "chess",
    "violin",
    "harbour",
    "kitten",
    "roof",
    "piano",
    "letters",
    "ramen",
    "concert",
    "marathon",
    "museum",
    "picnic",
    "printer",
    "stars",
    "fishing",
    "lake",
    "market",
    "forest",
    "beach",
    "attic",
]
ACTORS = ["Mina", "Lena", "Tom", "Priya", "Jonas"]


@pytest.fixture
def engram(sqlite_engram: Engram) -> Engram:
    return sqlite_engram


def populate(e: Engram, name: str, count: int, seed: int) -> tuple[UUID, list[str]]:
    """`count` nodes of varied length and words; returns the being id and the node ids in order."""
    rng = random.Random(seed)
    being_id = UUID(e.beings.register(name).being_id)
    being = e.store.get(Being, being_id)
    root = e.store.get(Cluster, next(iter(being.root_ids.values())))
    nodes = []
    for i in range(count):
        words = rng.sample(WORDS, rng.randint(2, 9))
        scene = SceneInput.model_validate(
            {
                "scene": {
                    "action": " ".join(words) + f" note{i}",
                    "actors": ["me", rng.choice(ACTORS)],
                    "when": [f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"],
                },
                "feeling": rng.choice(["calm", "proud", "tired garden"]),
            }
        )
        nodes.append(MemoryNode.create(uuid4(), scene, root, 0, e.clock.now()))
    embeddings = e.embedder.embed([n.scene["action"] for n in nodes])
    for node, embedding in zip(nodes, embeddings, strict=True):
        node.embed(embedding, e.clock.now())
    e.store.save(*nodes)
    e.views.ensure()
    return being_id, [str(n.id) for n in nodes]


def kill(e: Engram, being_id: UUID, ids: list[str]) -> None:
    at = e.clock.now()
    nodes = [e.store.get(MemoryNode, UUID(i), being_id=being_id) for i in ids]
    for node in nodes:
        node.flag_dying(10_000, at)
        node.make_dead(10_000, "test", at)
    e.store.save(*nodes)
    e.views.ensure()


@contextmanager
def plain_fts(e: Engram, being_id: UUID) -> Iterator[str]:
    """A full-text table of the being's rows as they are stored, actors unmarked: names are found
    with a column filter (`actors:"mina"`), as before ADR 0014. bm25 over it is the reference."""
    db = e.views.dbs["memory"]
    fts = "plain_fts_reference"
    cols = ", ".join(FTS_COLUMNS)
    with db.write() as conn:
        nodes = engine.read_tables(conn, db, e.views.projections["memory"])["nodes"]
        conn.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5({cols}, content='', tokenize='porter unicode61')"
        )
        conn.execute(
            f"INSERT INTO {fts}(rowid, {cols}) SELECT rowid, {cols} FROM {nodes} WHERE being_id = ?",
            [str(being_id)],
        )
    try:
        yield fts
    finally:
        with db.write() as conn:
            conn.execute(f"DROP TABLE {fts}")


def reference_lexical(
    e: Engram,
    being_id: UUID,
    text: str,
    limit: int,
    statuses: list[str],
    names: set[str],
    *,
    budget: int | None = None,
    window: int | None = None,
) -> list[tuple[str, float]]:
    """What `lexical` ranks, the straightforward way: score every match with one OR of all the terms,
    join every match, filter, sort, cut.

    With a `budget` (ADR 0012), only the candidates count: rows holding a selective term (the rarest
    terms whose exact match counts add up to at most `budget`), and, of the rows holding a common
    term, the newest `window`.
    """
    terms = query_terms(text)
    phrases = [f'actors:"{t}"' if t in names else f'"{t}"' for t in terms]
    db = e.views.dbs["memory"]
    with plain_fts(e, being_id) as fts, db.read() as conn:
        nodes = engine.read_tables(conn, db, e.views.projections["memory"])["nodes"]
        weights = ", ".join(str(w) for w in FTS_WEIGHTS)
        marks = ", ".join("?" for _ in statuses)
        rows = conn.query(
            f"SELECT n.id AS id, n.rowid AS rid, -bm25({fts}, {weights}) AS score FROM {fts} JOIN {nodes} n "
            f"ON n.rowid = {fts}.rowid WHERE {fts} MATCH ? AND n.status IN ({marks}) "
            "ORDER BY score DESC, n.id",
            [" OR ".join(phrases), *statuses],
        )
        matching = [
            {r["rowid"] for r in conn.query(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ?", [p])}
            for p in phrases
        ]
    if budget is not None and window is not None:
        chosen: set[int] = set()
        spent = 0
        for count, i in sorted((len(m), i) for i, m in enumerate(matching) if m):
            if spent + count > budget:
                break
            chosen.add(i)
            spent += count
        selective = set().union(*(m for i, m in enumerate(matching) if i in chosen))
        common = set().union(*(m for i, m in enumerate(matching) if i not in chosen))
        newest = set(sorted(common, reverse=True)[:window])
        rows = [r for r in rows if r["rid"] in selective or r["rid"] in newest]
    return [(str(r["id"]), float(r["score"])) for r in rows][:limit]


def same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """Equal scores in equal order; equal ids except among rows tied with the last one kept.

    Scores agree to 1e-9: a row scored by a query of fewer phrases sums them in another order.
    """
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=1e-12)
    if want:
        cut = want[-1][1]
        assert [i for i, s in got if abs(s - cut) > 1e-9] == [i for i, s in want if abs(s - cut) > 1e-9]


QUERIES = [
    "what did Mina and I do in the garden with the tomatoes?",
    "climbing by the river",
    "chess",
    "Lena piano concert harbour kitten",
    "fishing at the lake on a calm day",
    "garden",
]


@pytest.mark.parametrize(
    ("budget", "window"),
    [
        (10**6, 10**6),  # every match ranked at once: exact
        (40, 10**6),  # selective and common terms ranked apart, every row still a candidate: exact
        (40, 60),  # common-term rows only among the newest 60
        (0, 25),  # every term common
    ],
)
def test_lexical_matches_the_join_of_every_match(
    engram: Engram, monkeypatch: pytest.MonkeyPatch, budget: int, window: int
) -> None:
    monkeypatch.setattr(fts5_ranking, "LEXICAL_BUDGET", budget)
    monkeypatch.setattr(fts5_ranking, "LEXICAL_WINDOW", window)
    being_id, ids = populate(engram, "Aria", 600, seed=1)
    populate(engram, "Other", 200, seed=2)  # another being's matches must never count
    search = engram.views.search
    # Many of the best "garden" rows die: the status filter drops more than the slack.
    garden = [i for i, _ in search.lexical(being_id, "garden", 60)]
    kill(engram, being_id, garden[:45])
    for text in QUERIES:
        names = search.actor_terms(being_id, text)
        for limit in (1, 5, 10, 100):
            for statuses in (["active", "dying"], ["active", "dying", "dead"]):
                got = search.lexical(being_id, text, limit, statuses, actors=names)
                want = reference_lexical(
                    engram, being_id, text, limit, statuses, names, budget=budget, window=window
                )
                assert len(got) == len(want), (text, limit, statuses)
                same_ranking(got, want)
                # Ranked on a worker beside other work (ADR 0017): the same list, every regime.
                alongside = search.lexical_alongside(
                    lambda: "x", being_id, text, limit, statuses, actors=names
                )
                assert alongside == (got, "x")
                assert set(i for i, _ in got) <= set(ids)
    if budget == 10**6:
        # The exact regime is the plain OR, to the last bit.
        for text in QUERIES:
            names = search.actor_terms(being_id, text)
            got = search.lexical(being_id, text, 100, actors=names)
            want = reference_lexical(engram, being_id, text, 100, ["active", "dying"], names)
            assert [s for _, s in got] == [s for _, s in want]


def test_a_name_reaches_the_actors_field_only_as_a_name(engram: Engram) -> None:
    """ADR 0014: the actors field holds marked terms, so a name counts there only when the query
    treats it as one (`actors=`); as a plain word it matches the other fields."""
    being_id, _ = populate(engram, "Aria", 60, seed=4)
    search = engram.views.search
    assert search.actor_terms(being_id, "Mina") == {"mina"}
    as_name = dict(search.lexical(being_id, "Mina", 100, actors={"mina"}))
    assert as_name  # every row with Mina among its actors
    assert search.lexical(being_id, "Mina", 100) == []  # no action or feeling says "Mina"


def test_a_being_s_scores_ignore_other_beings(engram: Engram) -> None:
    """bm25's statistics are the being's own (ADR 0012): another being's notes move nothing."""
    being_id, _ = populate(engram, "Aria", 150, seed=5)
    before = {t: engram.views.search.lexical(being_id, t, 50) for t in QUERIES}
    populate(engram, "Other", 300, seed=6)
    assert {t: engram.views.search.lexical(being_id, t, 50) for t in QUERIES} == before


def fulltext_tables(e: Engram) -> set[str]:
    db = e.views.dbs["memory"]
    with db.read() as conn:
        rows = conn.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
        )
    return {str(r["name"]) for r in rows}


def test_the_full_text_follows_rewritten_scenes_not_state_changes_and_rebuilds_alike(engram: Engram) -> None:
    being_id, ids = populate(engram, "Aria", 80, seed=7)
    other_id, _ = populate(engram, "Other", 20, seed=8)
    search = engram.views.search
    at = engram.clock.now()
    survivor, absorbed = (engram.store.get(MemoryNode, UUID(i), being_id=being_id) for i in ids[:2])
    assert [i for i, _ in search.lexical(being_id, "note1", 10, ["active", "dying", "dead"])] == [ids[1]]
    # The survivor's `when` gains the absorbed node's action: its words now find the survivor too.
    survivor.absorb([absorbed], 0, at)
    engram.store.save(survivor, absorbed)
    engram.views.ensure()
    assert ids[0] in dict(search.lexical(being_id, "note1", 10, ["active"]))
    assert ids[1] in dict(search.lexical(being_id, "note1", 10, ["dead"]))
    # Status changes alone leave every being's index as it was.
    live = {t: search.lexical(being_id, t, 100, ["active", "dying", "dead"]) for t in QUERIES}
    kill(engram, being_id, ids[10:40])
    assert {t: search.lexical(being_id, t, 100, ["active", "dying", "dead"]) for t in QUERIES} == live
    tables = fulltext_tables(engram)
    assert len(tables) == 2 and all("_fts_" in t for t in tables)
    # A rebuild indexes the same rows per being, and the old generation's tables go with it.
    engram.views.rebuild("memory")
    assert {t: search.lexical(being_id, t, 100, ["active", "dying", "dead"]) for t in QUERIES} == live
    rebuilt = fulltext_tables(engram)
    assert len(rebuilt) == 2 and not rebuilt & tables
    assert search.lexical(other_id, "note1", 5) and not search.lexical(uuid4(), "note1", 5)


def test_actor_terms_in_one_statement_match_a_lookup_per_word(engram: Engram) -> None:
    being_id, _ = populate(engram, "Aria", 50, seed=3)
    search = engram.views.search
    db = engram.views.dbs["memory"]
    for text in [*QUERIES, "Mina Lena Tom Priya Jonas Zoe me", "Minas and Jonas's", "the and of"]:
        want = set()
        with plain_fts(engram, being_id) as fts, db.read() as conn:
            for word in (t for t in query_terms(text) if not t.isdigit()):
                hit = conn.query_one(
                    f"SELECT 1 AS hit FROM {fts} WHERE {fts} MATCH ? LIMIT 1", [f'actors:"{word}"']
                )
                if hit is not None:
                    want.add(word)
        assert search.actor_terms(being_id, text) == want
    # More words than SQLite allows in one compound SELECT.
    many = " ".join(f"word{i}" for i in range(600)) + " Mina"
    assert search.actor_terms(being_id, many) == {"mina"}
    assert not STOPWORDS & search.actor_terms(being_id, "me and the others")


def test_query_reads_only_the_memory_views_and_ranks_as_before(engram: Engram) -> None:
    """A query of a being answers from memory and vectors; both are caught up first."""
    populate(engram, "Aria", 120, seed=4)
    reading = Reading(engram, rng=random.Random(0))
    first = reading.query("Aria", "Mina in the garden with tomatoes", 10, reactivate=False)
    again = reading.query("Aria", "Mina in the garden with tomatoes", 10, reactivate=False)
    assert [(h.id, h.score) for h in first.nodes] == [(h.id, h.score) for h in again.nodes]
    assert len(first.nodes) == 10
    scores = [h.score or 0.0 for h in first.nodes]
    assert scores == sorted(scores, reverse=True)


def test_recall_uses_the_given_vector_and_never_the_embedder(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(engram, "Aria", 40, seed=5)
    [embedding] = engram.embedder.embed(["chess violin note3"])
    vector = np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)
    expected = Reading(engram, rng=random.Random(1)).recall("Aria", "chess violin note3")

    def no_embedding(texts: Any) -> Any:
        raise AssertionError("recall(vector=…) must not embed")

    monkeypatch.setattr(engram.embedder, "embed", no_embedding)
    # The text only matters for validation: the vector decides.
    given = Reading(engram, rng=random.Random(1)).recall("Aria", "something else entirely", vector=vector)
    assert [n.id for n in given.nodes] == [n.id for n in expected.nodes]
    assert given.nodes and given.position is not None


def test_the_day_of_a_when_read_without_json_is_the_same() -> None:
    import json

    whens: list[list[Any]] = [
        ["2026-05-02"],
        ["2026-05-02", "2026-05-03"],
        [{"date": "2026-05-02", "action": "x"}],
        ["ab", "cdef"],
        ["Day7", "x12"],
        ["2026-05-02T10"],
        ['2026"05-02'],
        ["a\\bcdefghij"],
        [],
    ]
    ranking = BeingRanking("nodes", 0, ["active"])
    rows = [
        {"id": f"n{i}", "seq": i, "status": "active", "importance": 0.5, "last_activated_at": None}
        | {"when_json": json.dumps(when, ensure_ascii=False), "asks": False}
        for i, when in enumerate(whens)
    ]
    assert ranking.apply(rows)
    for i, when in enumerate(whens):
        slot = ranking.slot[f"n{i}"]
        assert _day(ranking, slot) == first_date(when), when
        assert ranking.when_of(slot) == when
    assert ranking.day[ranking.slot["n0"]] == "2026-05-02", "a plain date is read without JSON"
