"""`_fts_top` reads bm25 scores back from text written by SQLite's `printf` (one row per statement,
ADR 0017): the text must give back the very float, or rankings would differ from a row-by-row read."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.fulltext.fts5_ranking import _BM25_TEXT

# bm25 sums a handful of terms of log-scaled frequencies: far inside this range.
scores = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=300)
@given(st.lists(scores, min_size=1, max_size=200))
def test_a_score_written_by_sqlite_reads_back_as_the_same_float(values: list[float]) -> None:
    conn = sqlite3.connect(":memory:")
    marks = ", ".join(f"printf('{_BM25_TEXT}', ?)" for _ in values)
    written = conn.execute(f"SELECT {marks}", values).fetchone()
    assert [float(text) for text in written] == values


def test_the_format_keeps_digits_that_sixteen_would_lose() -> None:
    """SQLite's `%g` stops at 16 significant digits unless told otherwise; these floats need 17."""
    conn = sqlite3.connect(":memory:")
    values = [7.5845962788056696, -37.912879488908104, 0.1 + 0.2]
    marks = ", ".join("printf('%.16g', ?)" for _ in values)
    short = conn.execute(f"SELECT {marks}", values).fetchone()
    assert all(float(text) != value for text, value in zip(short, values, strict=True))
    marks = ", ".join(f"printf('{_BM25_TEXT}', ?)" for _ in values)
    written = conn.execute(f"SELECT {marks}", values).fetchone()
    assert [float(text) for text in written] == values
