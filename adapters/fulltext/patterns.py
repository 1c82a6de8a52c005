"""How a caller's text becomes a bound parameter of a full-text or keyword statement, per backend.

Every piece of text a search takes goes through one of these functions, and the result is passed as
a parameter, never joined into the SQL: a quote, `*`, `NEAR`, `OR`, a column filter (`actors:`), a
LIKE or GLOB wildcard or a NUL in a query stays a literal to match. `tests/unit/test_fulltext_patterns.py`
checks each against its engine's grammar.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence


def json_string(text: str) -> str:
    """`text` as a JSON string, as a theme appears in the themes column (a JSON array): a pattern
    for it matches one whole theme, not part of one."""
    return json.dumps(text, ensure_ascii=False)


# -- SQLite FTS5 MATCH expressions -----------------------------------------------------------------


def fts5_phrase(text: str) -> str:
    """`text` as one FTS5 string (a phrase of its tokens): in double quotes, a quote doubled. Inside a
    string FTS5 reads no operator, prefix `*`, column filter or parenthesis. A NUL, which would end
    the string early, becomes a space: it separates tokens either way."""
    return '"' + text.replace('"', '""').replace("\x00", " ") + '"'


def fts5_any(phrases: Iterable[str]) -> str:
    """A MATCH expression for rows holding any of `phrases` (each from `fts5_phrase`)."""
    return " OR ".join(phrases)


def fts5_both(first: str, second: str) -> str:
    """A MATCH expression for rows matching both expressions."""
    return f"({first}) AND ({second})"


# -- SQLite GLOB ------------------------------------------------------------------------------------


def glob_contains(text: str) -> str:
    """`*text*` for SQLite GLOB, case-insensitive: each cased letter a class of its case variants,
    GLOB's wildcards (`*`, `?`, `[`) literal. SQLite's LIKE and LOWER fold ASCII only; this folds
    every letter (`Über` → `*[Üü][Bb][Ee][Rr]*`). No NUL: GLOB would end the pattern there."""
    _no_nul(text)
    out = []
    for c in text:
        if c in "*?[":
            out.append(f"[{c}]")
            continue
        variants = sorted({v for v in (c, c.lower(), c.upper()) if len(v) == 1})
        out.append(f"[{''.join(variants)}]" if len(variants) > 1 else c)
    return "*" + "".join(out) + "*"


# -- PostgreSQL ---------------------------------------------------------------------------------------


def like_contains(text: str) -> str:
    """`%text%` for LIKE … ESCAPE '\\': LIKE's wildcards (`%`, `_`) and the escape literal. No NUL:
    PostgreSQL's text refuses it."""
    _no_nul(text)
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def tsquery_lexeme(text: str, weight: str = "") -> str:
    """`text` as one quoted operand of `to_tsquery`, restricted to `weight` (a letter A–D) if given.
    Inside quotes `to_tsquery` reads no operator (`&`, `|`, `!`, `<->`), prefix or weight; a NUL,
    which PostgreSQL's text refuses, becomes a space (it separates words either way)."""
    if weight and weight not in ("A", "B", "C", "D"):
        raise ValueError(f"a tsquery weight is one of A, B, C, D, not {weight!r}")
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "''").replace("\x00", " ") + "'"
    return f"{quoted}:{weight}" if weight else quoted


def tsquery_any(terms: Sequence[str], weighted: Collection[str] = (), weight: str = "B") -> str:
    """A `to_tsquery` text for rows holding any of `terms`; those in `weighted` only under `weight`."""
    return " | ".join(tsquery_lexeme(t, weight if t in weighted else "") for t in terms)


def _no_nul(text: str) -> None:
    if "\x00" in text:
        raise ValueError("a search term must not contain NUL characters")
