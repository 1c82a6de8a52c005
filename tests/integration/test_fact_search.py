"""Fact retrieval (issue #11, ADR 0059) on both backends: each profile's formula on hand-built facts,
the relevance gate and strict mode, the trust filter, entity cards, merges, owners, the prompt
slice, hostile queries, re-embedding of revised facts, and a rebuild that calls no embedder."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import numpy as np
import pytest

from engram.domain.errors import InvalidInput
from engram.domain.fact import Fact
from engram.services.bootstrap import Engram
from engram.services.commands import FactInput, MessageInput
from engram.services.config import Settings
from tests.fact_search_support import T0, KeywordEmbedder, add, open_engram
from tests.support import SteppingClock

R2 = 1 / math.sqrt(2)


@pytest.fixture
def still_clock() -> SteppingClock:
    return SteppingClock(T0, timedelta(0))


@pytest.fixture
def keywords() -> KeywordEmbedder:
    return KeywordEmbedder()


@pytest.fixture
def fe(
    make_settings: Callable[..., Settings], still_clock: SteppingClock, keywords: KeywordEmbedder
) -> Iterator[Engram]:
    e = open_engram(make_settings, still_clock, keywords)
    yield e
    e.close()


def _later(clock: SteppingClock, days: float) -> None:
    clock.current = T0 + timedelta(days=days)


def test_hybrid_formula_with_semantic(fe: Engram, still_clock: SteppingClock) -> None:
    add(fe, "Mina works in her garden", confidence=0.8, channel="tg")
    _later(still_clock, 45)  # recency 1 / (1 + 45/45) = 0.5
    [hit] = fe.fact_search.search("Aria", "garden", channel="tg").hits
    # semantic: the fact's vector has the axes garden and work, the query garden only: 1/√2;
    # lexical: "garden" is inside the fact (substring) = 1.
    assert hit.parts == pytest.approx(
        {"semantic": 0.5 * R2, "lexical": 0.28, "confidence": 0.08, "recency": 0.035, "channel": 0.05},
        abs=1e-5,
    )
    assert hit.score == pytest.approx(0.5 * R2 + 0.28 + 0.08 + 0.035 + 0.05, abs=1e-5)
    assert hit.passed_gate
    other = fe.fact_search.search("Aria", "garden", channel="mail").hits[0]
    assert other.parts["channel"] == 0.0


def test_hybrid_without_semantic_and_the_backfill_of_eight(fe: Engram, keywords: KeywordEmbedder) -> None:
    ids = [add(fe, f"Mina drinks tea number {i}") for i in range(10)]
    keywords.texts.clear()
    hits = fe.fact_search.search("Aria", "tea", limit=24).hits
    # The query embedded 8 facts (the newest) and itself; the 2 oldest are ranked without semantic.
    assert len(keywords.texts) == 9
    unembedded = [h for h in hits if "semantic" not in h.parts]
    assert sorted(h.id for h in unembedded) == sorted(ids[:2])
    for h in unembedded:
        assert h.parts == pytest.approx(
            {"lexical": 0.75, "confidence": 0.10, "recency": 0.10, "channel": 0.05 * 0.25}
        )
    assert len(hits) == 10
    fe.fact_search.search("Aria", "tea")
    assert all(fe.store.get(Fact, uuid.UUID(i)).embedding is not None for i in ids)


def test_gate_and_strict_mode(fe: Engram) -> None:
    add(fe, "Mina likes coffee")
    loose = fe.fact_search.search("Aria", "music lessons").hits
    assert [h.passed_gate for h in loose] == [False]  # semantic 0, lexical 0: nothing passes
    assert loose[0].score == pytest.approx(0.10 + 0.07 + 0.05 * 0.25)
    assert fe.fact_search.search("Aria", "music lessons", strict=True).hits == []
    assert len(fe.fact_search.search("Aria", "coffee", strict=True).hits) == 1


def test_gate_keeps_only_what_passes(fe: Engram) -> None:
    add(fe, "Mina likes coffee")
    add(fe, "Mina plays music")
    hits = fe.fact_search.search("Aria", "music").hits
    assert [h.text for h in hits] == ["Mina plays music"]


def test_trust_filter(fe: Engram) -> None:
    add(fe, "John plays music", source_trust=0.9)
    add(fe, "John likes music", source_trust=0.3)
    add(fe, "John goes to work")  # cosine 1/2 with the query: under the 0.7 floor
    found = fe.fact_search.search("Aria", "john music", profile="trust")
    assert [h.text for h in found.hits] == ["John plays music"]
    assert found.hits[0].parts == pytest.approx({"semantic": 1.0})
    low = fe.fact_search.search("Aria", "john music", profile="trust", min_trust=0.2)
    assert sorted(h.text for h in low.hits) == ["John likes music", "John plays music"]
    with pytest.raises(InvalidInput) as err:
        fe.fact_search.search("Aria", "john", profile="trust", min_trust=1.5)
    assert err.value.details["field"] == "min_trust"


def test_blended_formula(fe: Engram, still_clock: SteppingClock) -> None:
    a = add(fe, "John loves music", entity_refs=["person:john"])
    still_clock.current = T0 + timedelta(days=14)
    add(fe, "Music at the john lee bar", entity_refs=["person:john", "place:bar"])
    add(fe, "Music of Austin", entity_refs=["place:austin"])
    _later(still_clock, 28)
    hits = {h.id: h for h in fe.fact_search.search("Aria", "john music", profile="blended").hits}
    assert len(hits) == 3
    # a: similarity 1 (john + music), stated 28 days ago (two half-lives: 0.25), its key person:john
    # carried by 2 of the 3 candidates.
    assert hits[a].parts == pytest.approx(
        {"similarity": 0.4, "recency": 0.3 * 0.25, "frequency": 0.3 * 2 / 3}, abs=1e-5
    )


def test_entity_cards_and_foundation(fe: Engram, still_clock: SteppingClock) -> None:
    add(fe, "John is my cofounder", entity_refs=["person:john"], entity_label="John")
    add(fe, "John lives in Austin", entity_refs=["person:john"], importance=2)
    add(fe, "John drinks tea", entity_refs=["person:john"], importance=1)  # below 2: not on a card
    add(fe, "John hates mornings", entity_refs=["person:john"], importance=3)
    still_clock.current = T0 + timedelta(hours=1)
    add(fe, "John runs marathons", entity_refs=["person:john"], importance=2)
    oslo = add(fe, "John was born in Oslo", entity_refs=["person:john"], pinned=True)
    tea = add(fe, "Mina drinks coffee", pinned=True)
    fe.facts.unpin("Aria", uuid.UUID(tea))
    found = fe.fact_search.search("Aria", "cofounder")
    assert [h.text for h in found.hits] == ["John is my cofounder"]
    [card] = found.cards
    assert card.ref == "person:john" and card.label == "John"
    # pinned first, then importance, then newest; 3 at most; the hit itself is not repeated.
    assert card.facts == ["John was born in Oslo", "John hates mornings", "John runs marathons"]
    assert card.line == "[person:john]: John was born in Oslo; John hates mornings; John runs marathons"
    assert found.block.splitlines()[0] == card.line
    assert found.foundation == ["John was born in Oslo"]  # the unpinned fact left it
    fe.facts.unpin("Aria", uuid.UUID(oslo))
    assert fe.fact_search.search("Aria", "cofounder").foundation == []


def test_reads_follow_merges(fe: Engram) -> None:
    add(fe, "Makesh is my brother at work", entity_refs=["person:makesh"])
    add(fe, "Mukesh lives in Pune", entity_refs=["person:mukesh"], importance=2)
    fe.facts.merge_entities("Aria", "person:makesh", "person:mukesh")
    found = fe.fact_search.search("Aria", "work")
    assert found.hits[0].entity_refs == ["person:mukesh"]
    assert [c.line for c in found.cards] == ["[person:mukesh]: Mukesh lives in Pune"]
    page = fe.fact_search.entity("Aria", "person:makesh")
    assert page.ref == "person:mukesh" and page.merged_into == "person:mukesh"
    assert sorted(h.text for h in page.mentions) == ["Makesh is my brother at work", "Mukesh lives in Pune"]
    [entity] = fe.fact_search.entities("Aria")
    assert (entity.ref, entity.mentions, entity.aliases) == ("person:mukesh", 2, ["person:makesh"])


def test_owners_never_leak(fe: Engram) -> None:
    fe.beings.register("Cy")
    add(fe, "Bo's secret garden is behind the shed", being="Bo")
    fe.spaces.create("crew", ["Aria", "Cy"])
    add(fe, "The crew garden opens on Monday", space="crew", being="Cy")
    add(fe, "Aria's garden has roses")
    for profile in ("hybrid", "blended", "trust"):
        texts = {h.text for h in fe.fact_search.search("Aria", "garden", profile=profile, min_trust=0).hits}
        assert "Bo's secret garden is behind the shed" not in texts
    aria = {h.text for h in fe.fact_search.search("Aria", "garden").hits}
    assert aria == {"The crew garden opens on Monday", "Aria's garden has roses"}
    bo = {h.text for h in fe.fact_search.search("Bo", "garden").hits}
    assert bo == {"Bo's secret garden is behind the shed"}
    assert fe.fact_search.entities("Bo") == []


@pytest.mark.parametrize("query", ["!!! ??? ...", "'; DROP TABLE facts; --", "garden " * 1428 + "abcd"])
def test_hostile_queries(fe: Engram, query: str) -> None:
    add(fe, "Mina works in her garden")
    if len(query) > 4000:
        with pytest.raises(InvalidInput) as err:
            fe.fact_search.search("Aria", query)
        assert err.value.details["field"] == "query"
        return
    found = fe.fact_search.search("Aria", query, strict=True)
    assert found.hits == []
    assert len(fe.fact_search.search("Aria", "garden").hits) == 1  # nothing was dropped


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_query(fe: Engram, query: str) -> None:
    with pytest.raises(InvalidInput) as err:
        fe.fact_search.search("Aria", query)
    assert err.value.details["field"] == "query"


def test_limit_clamped(fe: Engram) -> None:
    for i in range(30):
        add(fe, f"Mina drinks tea number {i}")
    assert len(fe.fact_search.search("Aria", "tea", limit=100).hits) == 24
    assert len(fe.fact_search.search("Aria", "tea", limit=0).hits) == 1


def test_revised_fact_is_embedded_again(fe: Engram, keywords: KeywordEmbedder) -> None:
    key = "profile|person|mina|fact"
    fact_id = add(fe, "Mina lives in Oslo", memory_key=key)
    fe.fact_search.search("Aria", "where does mina live")
    add(fe, "Mina lives in Austin", memory_key=key)
    keywords.texts.clear()
    [hit] = fe.fact_search.search("Aria", "austin").hits
    assert hit.id == fact_id and hit.parts["semantic"] == pytest.approx(0.5)  # 0.5 · cosine 1
    assert any("Mina lives in Austin" in t for t in keywords.texts)
    assert fe.store.get(Fact, uuid.UUID(fact_id)).embedded_text == "Mina lives in Austin"


def test_rebuild_calls_no_embedder(fe: Engram, keywords: KeywordEmbedder) -> None:
    add(fe, "Mina works in her garden")
    add(fe, "Mina plays music")
    before = fe.fact_search.search("Aria", "garden").hits
    keywords.texts.clear()
    fe.views.rebuild("fact_search")
    assert keywords.texts == []
    vector = np.array([1, 0, 0, 0, 0, 0, 0], dtype=np.float32)  # the query "garden", given
    after = fe.fact_search.search("Aria", "garden", vector=vector).hits
    assert keywords.texts == []
    assert [(h.id, h.score) for h in after] == [(h.id, h.score) for h in before]


def test_prompt_slice(fe: Engram) -> None:
    add(fe, "Mina likes coffee", subject="mina")
    add(fe, "Mina works at the coffee roastery", subject="mina", channel="tg")
    add(fe, "Tom likes coffee", subject="tom")
    fe.facts.state(
        "Aria",
        FactInput(text="Memory line: the cafe opens at eight.", subject="__lore__", type="lore"),
    )
    fe.messages.take(
        "Aria", MessageInput(id="m1", user="mina", channel="tg", text="More coffee please", at=T0)
    )
    fe.messages.take("Aria", MessageInput(id="m2", user="mina", channel="mail", text="coffee by mail", at=T0))
    s = fe.fact_search.slice("Aria", "mina", channel="tg", query="coffee")
    assert {h.text for h in s.user_facts} == {"Mina likes coffee", "Mina works at the coffee roastery"}
    assert "Tom likes coffee" not in {h.text for h in s.relevant_facts}
    assert [m["id"] for m in s.relevant_messages] == ["m1"]
    assert "About the user:" in s.text and "Relevant messages:" in s.text
    plain = fe.fact_search.slice("Aria", "mina")
    assert {h.text for h in plain.user_facts} == {"Mina likes coffee", "Mina works at the coffee roastery"}
    assert [h.text for h in plain.relevant_facts] == ["Memory line: the cafe opens at eight."]
    with pytest.raises(InvalidInput) as err:
        fe.fact_search.slice("Aria", "")
    assert err.value.details["field"] == "user"


def test_memory_md_people_and_lore(fe: Engram, still_clock: SteppingClock) -> None:
    add(fe, "Mina likes *green* tea", subject="mina")
    add(fe, "Mina runs the [garden] club", subject="mina", importance=3)
    _later(still_clock, 1)
    add(fe, "Tom fixes bikes", subject="tom")
    add(fe, "Bo's own fact", subject="bo", being="Bo")
    fe.facts.state(
        "Aria", FactInput(text="Memory line: the cafe opens at eight.", subject="__lore__", type="lore")
    )
    text = fe.journals.memory_text("Aria")
    people = text.split("## People\n\n")[1].split("\n\n")[0].splitlines()
    # The subjects most recently changed first; a subject's facts by importance; markdown escaped.
    assert people == [
        "- tom: Tom fixes bikes",
        "- mina: Mina runs the \\[garden\\] club; Mina likes \\*green\\* tea",
    ]
    lore = text.split("## Ongoing lore\n\n")[1].split("\n\n")[0].splitlines()
    assert lore == ["- the cafe opens at eight."]
    assert "Bo's own fact" not in text


def test_the_worker_embeds_facts_ahead(make_settings: Callable[..., Settings]) -> None:
    from engram.services.bootstrap import bootstrap
    from engram.services.worker import Worker
    from tests.integration.http_support import wait_until
    from tests.support import SeededIds

    keywords = KeywordEmbedder()
    e = bootstrap(
        make_settings(note_embed_interval_s=0.05), clock=SteppingClock(), ids=SeededIds(), embedder=keywords
    )
    try:
        e.beings.register("Aria")
        ids = [add(e, f"Mina drinks tea number {i}") for i in range(12)]  # more than a query backfills
        worker = Worker(
            e.views,
            names=["facts", "fact_search"],
            poll_interval=0.05,
            fact_embedding=e.fact_search.embed_pending,
        )
        worker.start()
        try:
            assert wait_until(
                lambda: all(e.store.get(Fact, uuid.UUID(i)).embedding is not None for i in ids), timeout=30
            )
        finally:
            worker.stop()
        keywords.texts.clear()
        assert len(e.fact_search.search("Aria", "tea", limit=24).hits) == 12
        assert keywords.texts == ["tea"], "the query embeds its own text, not the facts"
    finally:
        e.close()


def test_memory_md_people_follow_merges(fe: Engram) -> None:
    add(fe, "Makesh is my brother", subject="person:makesh")
    add(fe, "Mukesh lives in Pune", subject="person:mukesh", importance=2)
    fe.facts.merge_entities("Aria", "person:makesh", "person:mukesh")
    people = fe.journals.memory_text("Aria").split("## People\n\n")[1].split("\n\n")[0].splitlines()
    assert people == ["- person:mukesh: Mukesh lives in Pune; Makesh is my brother"]
