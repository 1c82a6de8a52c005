"""What `query` reads in texts (ADR 0008): the dates a query names and a memory's, names, questions.

Pure functions: no I/O, nothing specific to one data set. The ranking that uses them is
`services/ranking.py`.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import re
from collections.abc import Collection, Iterable
from typing import Any

from engram.projections.fulltext.terms import WORD

_MONTHS: dict[str, int] = {}
for _i in range(1, 13):
    _MONTHS[calendar.month_name[_i].lower()] = _i
    _MONTHS[calendar.month_abbr[_i].lower()] = _i
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.IGNORECASE)
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")

DateSpan = tuple[_dt.date, _dt.date]


def _date(year: int, month: int, day: int) -> _dt.date | None:
    try:
        return _dt.date(year, month, day)
    except ValueError:
        return None


def query_dates(text: str) -> list[DateSpan]:
    """The calendar dates a query names, as inclusive spans: `"8 May, 2023"`, `"May 8th 2023"` and
    `"2023-05-08"` are one day; `"May 2023"` is the whole month. Bare years and relative dates
    ("last week") are not read."""
    spans: list[DateSpan] = []
    taken: list[tuple[int, int]] = []

    def add(start: _dt.date | None, end: _dt.date | None, where: tuple[int, int]) -> None:
        if start is None or end is None or any(a < where[1] and where[0] < b for a, b in taken):
            return
        taken.append(where)
        if (start, end) not in spans:
            spans.append((start, end))

    for m in _ISO.finditer(text):
        day = _date(int(m[1]), int(m[2]), int(m[3]))
        add(day, day, m.span())
    for m in _DAY_MONTH_YEAR.finditer(text):
        day = _date(int(m[3]), _MONTHS[m[2].lower()], int(m[1]))
        add(day, day, m.span())
    for m in _MONTH_DAY_YEAR.finditer(text):
        day = _date(int(m[3]), _MONTHS[m[1].lower()], int(m[2]))
        add(day, day, m.span())
    for m in _MONTH_YEAR.finditer(text):
        year, month = int(m[2]), _MONTHS[m[1].lower()]
        add(_date(year, month, 1), _date(year, month, calendar.monthrange(year, month)[1]), m.span())
    return spans


def node_dates(when: Iterable[Any]) -> list[_dt.date]:
    """Every calendar date in a scene's `when` (plain `YYYY-MM-DD` strings and `{date, action}` entries)."""
    out: list[_dt.date] = []
    for item in when:
        value = item.get("date") if isinstance(item, dict) else item
        if isinstance(value, str) and len(value) == 10:
            try:
                out.append(_dt.date.fromisoformat(value))
            except ValueError:
                continue
    return out


def first_date(when: Iterable[Any]) -> str | None:
    """The label of a scene's first `when` entry (the day a memory belongs to)."""
    for item in when:
        value = item.get("date") if isinstance(item, dict) else item
        return value if isinstance(value, str) else None
    return None


def strip_words(text: str, words: Collection[str]) -> str:
    """`text` without the given words (case-insensitive, whole words, with a possessive 's)."""
    if not words:
        return text
    lowered = {w.lower() for w in words}
    kept = "".join("" if part.lower() in lowered else part for part in re.split(r"(\w+)", text))
    kept = re.sub(r"(?<!\w)['’]s\b", "", kept)
    kept = re.sub(r"\s+([?.!,;:])", r"\1", re.sub(r"\s+", " ", kept)).strip()
    return kept if WORD.search(kept) else text


def is_question(action: str) -> bool:
    """A memory that asks something ("… what did you paint?")."""
    return "?" in action
