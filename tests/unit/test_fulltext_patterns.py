"""`adapters/fulltext/patterns.py`: a caller's text becomes a literal to match, whatever it holds.

Each pattern is checked against its engine (an in-memory SQLite; PostgreSQL's `to_tsquery` in
`tests/integration/test_hostile_search.py`) and a plain Python reference of what it should match.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.fulltext.patterns import (
    fts5_any,
    fts5_both,
    fts5_phrase,
    glob_contains,
    json_string,
    like_contains,
    tsquery_any,
    tsquery_lexeme,
)

HOSTILE = [
    '"',
    '""',
    'chess"',
    '"chess" OR "bread"',
    "*",
    "ch*",
    "NEAR(chess river)",
    "chess OR bread",
    "chess AND NOT bread",
    "chess NOT bread",
    "actors:mina",
    "{action actors}: chess",
    "^chess",
    "(chess",
    "chess)",
    "-chess",
    "+",
    "a\x00b",
    "\\",
    "it's",
    "x" * 4000,
]

# Letters with case variants, every wildcard and quoting character the engines know, a few others.
ALPHABET = st.sampled_from(list("aAbBüÜßẞİıσΣ*?[]%_\\\"' -:^()"))


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    """An FTS5 table as the adapter builds them, with rows that hold the hostile texts' words."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(action, actors, content='', tokenize='porter unicode61')")
    rows = [
        (1, "played chess by the river", "mina"),
        (2, "baked bread near the harbour", "lena"),
        (3, "said it s fine", "tom"),
        (4, "actors on a stage", "priya"),
    ]
    conn.executemany("INSERT INTO f(rowid, action, actors) VALUES (?, ?, ?)", rows)
    yield conn
    conn.close()


def matches(conn: sqlite3.Connection, expression: str) -> set[int]:
    return {r[0] for r in conn.execute("SELECT rowid FROM f WHERE f MATCH ?", [expression])}


@pytest.mark.parametrize("text", HOSTILE)
def test_an_fts5_phrase_is_one_string_whatever_it_holds(fts: sqlite3.Connection, text: str) -> None:
    """No operator, prefix, column filter or quote in the text acts: the phrase matches the rows
    holding its tokens in a row, as the same tokens joined by spaces do."""
    tokens = " ".join("".join(c if c.isalnum() else " " for c in text).split())
    assert matches(fts, fts5_phrase(text)) == matches(fts, f'"{tokens}"')
    assert matches(fts, fts5_any([fts5_phrase(text), fts5_phrase("bread")])) >= {2}


def test_phrases_compose_as_or_and_and(fts: sqlite3.Connection) -> None:
    chess, bread, river = (fts5_phrase(w) for w in ("chess", "bread", "river"))
    assert matches(fts, fts5_any([chess, bread])) == {1, 2}
    assert matches(fts, fts5_both(fts5_any([chess, bread]), river)) == {1}
    assert matches(fts, fts5_phrase("NEAR(chess river)")) == set()  # not a NEAR group: no such phrase
    assert matches(fts, fts5_phrase("actors:mina")) == set()  # not a column filter
    assert matches(fts, fts5_phrase("ch*")) == set()  # not a prefix query
    assert matches(fts, fts5_phrase("chess by")) == {1}


@settings(max_examples=300, deadline=None)
@given(text=st.text(min_size=0, max_size=12))
def test_any_text_makes_a_valid_phrase(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(action, content='', tokenize='porter unicode61')")
    conn.execute("INSERT INTO f(rowid, action) VALUES (1, 'x')")
    conn.execute("SELECT rowid FROM f WHERE f MATCH ?", [fts5_both(fts5_phrase(text), fts5_any(["x"]))])


def _variants(c: str) -> set[str]:
    return {v for v in (c, c.lower(), c.upper()) if len(v) == 1}


def _contains_folded(haystack: str, needle: str) -> bool:
    """The reference: some run of `haystack` matches `needle` letter by letter, in either case."""
    n = len(needle)
    return any(
        all(haystack[i + j] in _variants(needle[j]) for j in range(n)) for i in range(len(haystack) - n + 1)
    )


@settings(max_examples=400, deadline=None)
@given(needle=st.text(ALPHABET, min_size=1, max_size=4), haystack=st.text(ALPHABET, max_size=12))
def test_glob_contains_is_a_case_folded_substring(needle: str, haystack: str) -> None:
    conn = sqlite3.connect(":memory:")
    [[found]] = conn.execute("SELECT ? GLOB ?", [haystack, glob_contains(needle)]).fetchall()
    assert bool(found) == _contains_folded(haystack, needle)


@settings(max_examples=400, deadline=None)
@given(needle=st.text(ALPHABET, min_size=1, max_size=4), haystack=st.text(ALPHABET, max_size=12))
def test_like_contains_is_a_plain_substring(needle: str, haystack: str) -> None:
    """Checked on SQLite with case-sensitive LIKE, PostgreSQL's: `%` and `_` in a term are characters."""
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA case_sensitive_like = ON")
    [[found]] = conn.execute("SELECT ? LIKE ? ESCAPE '\\'", [haystack, like_contains(needle)]).fetchall()
    assert bool(found) == (needle in haystack)


def test_a_theme_pattern_is_one_whole_json_string() -> None:
    assert json_string("Über") == '"Über"'
    assert json_string('say "hi"') == '"say \\"hi\\""'
    conn = sqlite3.connect(":memory:")
    themes = '["garden", "work"]'
    for term, found in (("work", 1), ("wor", 0), ("Garden", 1)):
        assert conn.execute("SELECT ? GLOB ?", [themes, glob_contains(json_string(term))]).fetchone() == (
            found,
        )


def test_tsquery_lexemes_are_quoted_and_weights_checked() -> None:
    assert tsquery_lexeme("chess") == "'chess'"
    assert tsquery_lexeme("it's", "B") == "'it''s':B"
    assert tsquery_lexeme("a\\b") == "'a\\\\b'"
    assert tsquery_any(["mina", "garden"], {"mina"}) == "'mina':B | 'garden'"
    assert tsquery_lexeme("a\x00b") == "'a b'"  # PostgreSQL's text refuses NUL; it separates words
    for weight in ("B | y", "AB", "b"):
        with pytest.raises(ValueError, match="weight"):
            tsquery_lexeme("x", weight)
    for make in (glob_contains, like_contains):  # GLOB would stop at it; PostgreSQL refuses it
        with pytest.raises(ValueError, match="NUL"):
            make("a\x00b")
