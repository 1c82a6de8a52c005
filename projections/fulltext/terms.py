"""The words a query searches the full-text index for: the same on both backends."""

from __future__ import annotations

import re

WORD = re.compile(r"\w+", re.UNICODE)

_ENGLISH_STOP = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
    her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor not only own
    same so than too very s t can will just don should now
"""
STOPWORDS = frozenset(_ENGLISH_STOP.split())
"""PostgreSQL's `english` stop words (Snowball): `query_terms` drops them on both backends, so SQLite's
full-text index neither ranks a node for sharing "the" with the query nor scores every node for it."""


def query_terms(text: str) -> list[str]:
    """The words a search looks for: lower-cased, deduplicated, without stop words and 1-letter words.

    Only runs of word characters: whatever else the text holds (quotes, `*`, `:`, parentheses, NUL)
    never reaches a full-text statement."""
    return list(
        dict.fromkeys(
            t for t in WORD.findall(text.lower()) if (len(t) > 1 or t.isdigit()) and t not in STOPWORDS
        )
    )
