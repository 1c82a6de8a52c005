"""Message search through the Python API, on both backends (ADR 0055): ranking and its tie-break,
filters, snippets, a rebuilt search view answering as the live one did, and the query's rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.domain.errors import InvalidInput
from engram.services.bootstrap import Engram
from engram.services.commands import MessageInput
from engram.services.message_search import snippet

T0 = datetime(2026, 10, 30, 9, 0, tzinfo=UTC)


def _take(engram: Engram, key: str, text: str, minutes: int, user: str = "mina", channel: str = "tg") -> None:
    engram.messages.take(
        "Aria",
        MessageInput(id=key, user=user, channel=channel, text=text, at=T0 + timedelta(minutes=minutes)),
    )


@pytest.fixture
def chat(engram: Engram) -> Engram:
    engram.beings.register("Aria")
    _take(engram, "a", "The tomatoes are ripe", 0)
    _take(engram, "b", "The tomatoes are ripe", 5, channel="mail")
    _take(engram, "c", "Tomatoes! Tomatoes and more tomatoes in the greenhouse", 10, user="tom")
    _take(engram, "d", "Nothing about the garden at all", 15)
    _take(engram, "e", "Basil next to the tomatoes " + "and a long story " * 30, 20)
    return engram


def _ids(engram: Engram, query: str, **kw: object) -> list[str]:
    return [h.id for h in engram.message_search.search("Aria", query, **kw).hits]  # type: ignore[arg-type]


def test_ranking_filters_and_ties(chat: Engram) -> None:
    assert _ids(chat, "tomatoes")[0] == "c"  # three times
    assert _ids(chat, "tomatoes")[1:] == ["e", "b", "a"]  # once each, equal scores: the newest first
    assert _ids(chat, "tomatoes", user="tom") == ["c"]
    assert _ids(chat, "tomatoes ripe", channel="tg") == ["a", "c", "e"]  # both words first
    assert _ids(chat, "TOMATOES", limit=1) == ["c"]
    assert _ids(chat, "zucchini") == []
    hit = chat.message_search.search("Aria", "basil").hits[0]
    assert hit.snippet.startswith("Basil next to the tomatoes and a long story") and hit.snippet.endswith("…")
    assert len(hit.snippet) <= 162


def test_a_rebuilt_search_view_answers_as_the_live_one(chat: Engram) -> None:
    before = chat.message_search.search("Aria", "tomatoes ripe greenhouse").hits
    chat.views.rebuild("message_search")
    after = chat.message_search.search("Aria", "tomatoes ripe greenhouse").hits
    assert [(h.id, h.score) for h in after] == [(h.id, h.score) for h in before] and len(before) == 4


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ('"tomatoes', ["c"]),
        ("tomatoes' OR 1=1; --", ["c"]),
        ("%", []),
        ("___", []),
        ("ripe)*(", ["b", "a"]),
    ],
)
def test_query_text_is_only_its_words(chat: Engram, query: str, want: list[str]) -> None:
    assert _ids(chat, query)[: len(want)] == want
    if not want:
        assert _ids(chat, query) == []


@pytest.mark.parametrize(
    ("query", "field", "kw"),
    [
        ("", "query", {}),
        ("  ", "query", {}),
        ("x" * 10_000, "query", {}),
        ("a\x00b", "query", {}),
        ("tomatoes", "limit", {"limit": 0}),
        ("tomatoes", "channel", {"channel": ""}),
        ("tomatoes", "user", {"user": "m\x00"}),
    ],
)
def test_bad_queries_name_their_field(chat: Engram, query: str, field: str, kw: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as refused:
        chat.message_search.search("Aria", query, **kw)  # type: ignore[arg-type]
    assert refused.value.details["field"] == field


def test_snippet_cuts_around_the_first_word() -> None:
    text = "word " * 100 + "tomatoes " + "tail " * 100
    cut = snippet(text, {"tomatoes"}, width=40)
    assert "tomatoes" in cut and cut.startswith("…") and cut.endswith("…")
    assert snippet("  short\n text ", {"x"}) == "short text"
