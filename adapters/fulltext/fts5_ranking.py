"""SQLite: ranking a being's FTS5 table by bm25, with the work bounded by its index (ADR 0012).

The statements that rank come back unrun (`RankingPlan`), so that `FullTextSearch` can run them on a
worker thread beside the vector search (ADR 0017); the cheap ones that plan them run at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from engram.adapters.fulltext.patterns import fts5_any, fts5_both
from engram.projections.fulltext.port import FTS_COLUMNS, Hits, RankingPlan, best_per_row
from engram.projections.sql import ViewConnection

FTS_WEIGHTS = dict(zip(FTS_COLUMNS, (1.0, 1.0, 0.6, 0.4, 0.6, 0.3, 0.4), strict=True)).values()
"""bm25 column weights: action and actors count most (names match the actors only, ADR 0008); when
and the themes next; feeling, setting, dialogue least."""

_BM25_RANK = "bm25(" + ", ".join(str(w) for w in FTS_WEIGHTS) + ")"
"""The ranking function with the column weights, bound to `rank MATCH ?` (a parameter, so one
statement text serves every query)."""

_BM25_TEXT = "%!.17g"
"""SQLite's `printf` format for a bm25 score: 17 significant digits, which Python reads back as the
same float for any magnitude bm25 can reach (`tests/unit/test_fts_scores_text.py`)."""

LEXICAL_SLACK = 20
"""Extra full-text rows fetched beyond `limit`, for the rows `_fts_top` drops (other statuses, ties)."""

LEXICAL_BUDGET = 200
"""How many postings of a being's full-text index one query ranks exactly (ADR 0012): the rarest
terms whose matches add up to this many are selective; the others are common."""

LEXICAL_WINDOW = 100
"""Rows that match only common terms are ranked among the newest this many of them (ADR 0012)."""


def _fts_top(
    conn: ViewConnection,
    nodes: str,
    fts: str,
    match: str,
    limit: int,
    statuses: set[str],
    *,
    min_rowid: int | None = None,
) -> Hits:
    """The `limit` best rows of an FTS5 match among `statuses` by bm25, best first (ties by id).

    FTS5 sorts by `rank` inside the index and keeps the top rows, so only those are joined to the
    nodes (ids, statuses) instead of every match; a few more than `limit` are
    fetched for the rows of other statuses, and more are asked for in the rare case that is not
    enough. Rows with exactly the same bm25 across the cut are taken in rowid (noting) order.
    `min_rowid`: only rows from it on.

    The rows come back as one text, joined inside the statement: SQLite then does the whole join
    in one step, without the GIL, while the vector search holds it (ADR 0017), where row by row
    each row waited for it. `_BM25_TEXT` writes a score so that it reads back as the same float.
    """
    fetch = limit + LEXICAL_SLACK
    while True:  # one statement text for every call: preparing it costs more than running it
        row = conn.query_one(
            f"SELECT group_concat(printf('%d %s %s {_BM25_TEXT}', t.rowid, n.id, n.status, -t.rank), "
            f"char(10)) AS hits FROM (SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND rank MATCH ? "
            f"AND rowid >= ? ORDER BY rank, rowid LIMIT ?) AS t JOIN {nodes} n ON n.rowid = t.rowid",
            [match, _BM25_RANK, min_rowid or 0, fetch],
        )
        found = [hit.split(" ") for hit in row["hits"].split("\n")] if row and row["hits"] else []
        kept = [
            (float(score), -int(rowid), node_id)
            for rowid, node_id, status, score in found
            if status in statuses
        ]
        kept.sort(reverse=True)  # best score first, then the lower rowid
        if len(kept) >= limit or len(found) < fetch:
            return sorted(
                ((node_id, score) for score, _, node_id in kept[:limit]), key=lambda hit: (-hit[1], hit[0])
            )
        fetch *= 4


def _postings(conn: ViewConnection, fts: str, phrases: Sequence[str], cap: int) -> list[int]:
    """How many rows match each phrase, counted up to `cap` (one statement; each count stops there)."""
    rows = conn.query(
        "SELECT "
        + ", ".join(
            f"(SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?)) AS n{i}"
            for i in range(len(phrases))
        ),
        [value for phrase in phrases for value in (phrase, cap)],
    )
    return [int(rows[0][f"n{i}"]) for i in range(len(phrases))]


def ranked(
    conn: ViewConnection,
    nodes: str,
    fts: str,
    phrases: Sequence[str],
    limit: int,
    statuses: set[str],
) -> RankingPlan:
    """bm25 top `limit` for the OR of `phrases` (each from `fts5_phrase`), with the work bounded by
    the being's index (ADR 0012): the statements that rank, to run in `conn`'s transaction on any
    thread (ADR 0017), and how to merge their lists. The cheap statements that plan them run here.

    Exact while the query's postings fit `LEXICAL_BUDGET` (every small being, most queries). Beyond
    it, like a common-terms query: every row holding one of the selective (rarest) terms is ranked
    exactly — with the common terms' contributions, from a second query that requires one of each —
    and rows holding only common terms are ranked among the newest `LEXICAL_WINDOW` of them.

    A phrase adds the same to a row's bm25 in any query (its statistics are the index's), so a query
    whose phrases include every term a row holds scores it exactly and the others score it lower:
    the best score per row over the lists is exact, and so is the top of their union.
    """
    counts = _postings(conn, fts, phrases, LEXICAL_BUDGET + 1)
    present = sorted((n, i) for i, n in enumerate(counts) if n > 0)
    merge = partial(best_per_row, limit=limit)
    if not present:
        return RankingPlan([], merge)
    chosen: set[int] = set()
    spent = 0
    for n, i in present:
        if spent + n > LEXICAL_BUDGET:
            break
        chosen.add(i)
        spent += n
    # In the query's own order: bm25 then sums in the same order, to the last bit, as one OR would.
    selective = [p for i, p in enumerate(phrases) if i in chosen]
    common = [p for i, p in enumerate(phrases) if i not in chosen and counts[i] > 0]

    def top(match: str, min_rowid: int | None = None) -> Callable[[], Hits]:
        return lambda: _fts_top(conn, nodes, fts, match, limit, statuses, min_rowid=min_rowid)

    if not common:
        return RankingPlan([top(fts5_any(selective))], merge)
    any_common = fts5_any(common)
    floor = conn.query_one(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        [any_common, LEXICAL_WINDOW - 1],
    )
    # The common terms' statements first: their bm25 walks every posting of those terms.
    statements = [top(any_common, None if floor is None else floor["rowid"])]
    if selective:
        any_selective = fts5_any(selective)
        statements += [top(fts5_both(any_selective, any_common)), top(any_selective)]
    return RankingPlan(statements, merge)
