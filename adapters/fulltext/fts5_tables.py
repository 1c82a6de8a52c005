"""SQLite: the beings' FTS5 tables beside a generation's nodes table, and how they follow its rows.

One contentless FTS5 table per being (ADR 0012), its actors marked (ADR 0014). The memory view
keeps them current in its own write transactions: the stored text of a row about to be rewritten
leaves its being's table first (`forget`), the row as written is indexed after the flush (`index`).
State-only updates (status, reactivations) never touch them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from engram.projections.fulltext.port import FTS_COLUMNS
from engram.projections.sql import ViewConnection, chunks
from engram.projections.tables import MAX_IN_LIST

ACTOR_MARK = "zzactor"
"""What each word of the actors field is indexed with in front of it (ADR 0014). A name is then a
term of its own, found by a seek: \"is this word one of the being's actors?\" and bm25 over the
actors field read that term's few postings, not every posting of the word in the other fields."""

_TOKEN = re.compile(r"[^\W_]+")
"""A run of letters and digits: what FTS5's unicode61 tokenizer makes one token of."""

_ACTORS_AT = FTS_COLUMNS.index("actors")
_COLUMNS = ", ".join(FTS_COLUMNS)
_MARKS = ", ".join("?" for _ in range(len(FTS_COLUMNS) + 1))  # rowid and the indexed columns

FILL_SLICE = 5000
"""Rows read at a time when `create` fills the beings' full-text tables (a rebuild's)."""


def actor_term(word: str) -> str:
    """The full-text term that stands for `word` in the actors field."""
    return ACTOR_MARK + word


def actor_tokens(actors: str | None) -> str:
    """The actors field as the full-text index holds it: each token marked (`actor_term`)."""
    return " ".join(actor_term(t) for t in _TOKEN.findall(actors or ""))


def fts_values(rowid: int, values: Sequence[Any]) -> list[Any]:
    """(rowid, indexed columns in `FTS_COLUMNS` order) as the full-text table takes them."""
    out = [rowid, *values]
    out[1 + _ACTORS_AT] = actor_tokens(values[_ACTORS_AT])
    return out


def fts_table(nodes: str, being_id: str) -> str:
    """The being's own full-text table over `nodes` (ADR 0012).

    One FTS5 table per being: a query reads only its being's postings, and bm25's statistics
    (document frequencies, average length) are its being's alone, so another being's memories
    neither cost a query time nor move its scores.
    """
    return f"{nodes}_fts_{being_id.replace('-', '')}"


def fts_registry(nodes: str) -> str:
    """The beings that have a full-text table; it exists once the generation's full-text index is
    live (after a rebuild's bulk load, at once for a new view)."""
    return f"{nodes}_fts_beings"


def exists(conn: ViewConnection, table: str) -> bool:
    found = conn.query_one("SELECT 1 AS hit FROM sqlite_master WHERE type = 'table' AND name = ?", [table])
    return found is not None


def _create_being_table(conn: ViewConnection, nodes: str, being_id: str) -> str:
    fts = fts_table(nodes, being_id)
    # Contentless: the index holds no copy of the text, and a `rebuild` that would index every
    # being's rows cannot happen; rows leave it through the 'delete' command with their old values.
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5({_COLUMNS}, content='', "
        "tokenize='porter unicode61')"
    )
    conn.execute(f"INSERT OR IGNORE INTO {fts_registry(nodes)} (being_id) VALUES (?)", [being_id])
    return fts


def _by_being(rows: Sequence[dict[str, Any]], out: dict[str, list[list[Any]]]) -> None:
    """Add rows (`rid`, `being_id`, the indexed columns) to `out` as the full-text tables take them."""
    for row in rows:
        out.setdefault(str(row["being_id"]), []).append(fts_values(row["rid"], [row[c] for c in FTS_COLUMNS]))


def _stored_rows(conn: ViewConnection, nodes: str, keys: Sequence[str]) -> dict[str, list[list[Any]]]:
    """(rowid, indexed columns) of the stored rows among `keys`, by being."""
    out: dict[str, list[list[Any]]] = {}
    for part in chunks(keys, MAX_IN_LIST):
        marks = ", ".join("?" for _ in part)
        _by_being(
            conn.query(
                f"SELECT rowid AS rid, being_id, {_COLUMNS} FROM {nodes} WHERE id IN ({marks})",
                list(part),
            ),
            out,
        )
    return out


def create(conn: ViewConnection, nodes: str) -> None:
    """The registry, and every being's table over the rows `nodes` holds (none on a new view): a
    rebuild indexes once after its bulk load instead of on every write."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {fts_registry(nodes)} (being_id TEXT PRIMARY KEY)")
    last = 0
    while True:  # in rowid order, a slice at a time: a rebuild's rows never all sit in memory
        rows = conn.query(
            f"SELECT rowid AS rid, being_id, {_COLUMNS} FROM {nodes} WHERE rowid > ? "
            f"ORDER BY rowid LIMIT {FILL_SLICE}",
            [last],
        )
        if not rows:
            break
        last = rows[-1]["rid"]
        by_being: dict[str, list[list[Any]]] = {}
        _by_being(rows, by_being)
        for being_id, values in by_being.items():
            fts = _create_being_table(conn, nodes, being_id)
            conn.executemany(f"INSERT INTO {fts}(rowid, {_COLUMNS}) VALUES ({_MARKS})", values)


def drop(conn: ViewConnection, nodes: str) -> None:
    """The beings' tables of `nodes`' generation (and, from schema 3, the one shared table); their
    shadow tables go with them."""
    for row in conn.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' "
        "AND name LIKE ? ESCAPE '\\'",
        [nodes.replace("_", "\\_") + "\\_fts%"],
    ):
        conn.execute(f"DROP TABLE IF EXISTS {row['name']}")
    conn.execute(f"DROP TABLE IF EXISTS {fts_registry(nodes)}")


def drop_being(conn: ViewConnection, nodes: str, being_id: str) -> None:
    """The being's table (its shadow tables go with it) and its place in the registry: as a
    rebuild without the being's rows leaves them (ADR 0077)."""
    conn.execute(f"DROP TABLE IF EXISTS {fts_table(nodes, being_id)}")
    if exists(conn, fts_registry(nodes)):
        conn.execute(f"DELETE FROM {fts_registry(nodes)} WHERE being_id = ?", [being_id])


def forget(conn: ViewConnection, nodes: str, keys: Collection[str], *, stored: bool) -> list[str]:
    """Take the stored text of the rows `keys`, about to be written whole, out of their beings'
    tables; the keys to index once written. None before the generation's index is live (a
    rebuild's bulk load: `create` indexes its rows)."""
    if not keys or not exists(conn, fts_registry(nodes)):
        return []
    ordered = sorted(keys)
    if not stored:
        return ordered  # a rebuild's new rows: none is stored yet
    for being_id, rows in _stored_rows(conn, nodes, ordered).items():
        fts = fts_table(nodes, being_id)
        conn.executemany(f"INSERT INTO {fts}({fts}, rowid, {_COLUMNS}) VALUES ('delete', {_MARKS})", rows)
    return ordered


def compact(conn: ViewConnection, nodes: str, being_id: str) -> None:
    """Merge the being's table into one segment. A contentless FTS5 table takes a row out by
    writing a deletion beside the segments that hold its terms: the words stay in the file until a
    merge drops them. `optimize` rewrites every segment without the deleted rows (a fraction of a
    second at 100k rows, in the erasure's transaction); the old pages are then freed and the
    erasure's scrub of the view's files takes them out."""
    fts = fts_table(nodes, being_id)
    if exists(conn, fts):
        conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")


def index(conn: ViewConnection, nodes: str, keys: Sequence[str]) -> None:
    """Index the rows `keys` as written, in their beings' tables (created on a being's first row)."""
    for being_id, rows in _stored_rows(conn, nodes, keys).items():
        fts = _create_being_table(conn, nodes, being_id)
        conn.executemany(f"INSERT INTO {fts}(rowid, {_COLUMNS}) VALUES ({_MARKS})", rows)
