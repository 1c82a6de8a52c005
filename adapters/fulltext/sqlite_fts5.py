"""`FullTextIndex` on SQLite FTS5: a contentless table per being beside the memory view's nodes.

- the tables and how they follow the rows: `fts5_tables.py` (ADR 0012, names marked: ADR 0014);
- bm25 ranking with a budget: `fts5_ranking.py` (ADR 0012, its statements beside the vector
  search: ADR 0017);
- merging a being's index in short steps: `fts5_merge.py` (ADR 0020).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any
from uuid import UUID

from engram.adapters.fulltext import fts5_merge, fts5_ranking, fts5_tables
from engram.adapters.fulltext.fts5_tables import actor_term, fts_table
from engram.adapters.fulltext.patterns import fts5_phrase, glob_contains, json_string
from engram.projections.engine import Projection
from engram.projections.fulltext.port import BeingIndex, Condition, IndexSize, RankingPlan
from engram.projections.sql import ViewConnection, ViewDatabase, chunks

ACTOR_LOOKUPS = 200
"""Words looked up in one statement by `actor_terms` (SQLite allows 500 terms in a compound SELECT)."""


class SQLiteFullText:
    # -- kept by the memory view ------------------------------------------------------------------

    def create(self, conn: ViewConnection, nodes: str) -> None:
        fts5_tables.create(conn, nodes)

    def drop(self, conn: ViewConnection, nodes: str) -> None:
        fts5_tables.drop(conn, nodes)

    def drop_being(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        fts5_tables.drop_being(conn, nodes, str(being_id))

    def forget(self, conn: ViewConnection, nodes: str, keys: Collection[str], *, stored: bool) -> list[str]:
        return fts5_tables.forget(conn, nodes, keys, stored=stored)

    def index(self, conn: ViewConnection, nodes: str, keys: Sequence[str]) -> None:
        fts5_tables.index(conn, nodes, keys)

    def compact_after_erasure(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        fts5_tables.compact(conn, nodes, str(being_id))

    # -- searching --------------------------------------------------------------------------------

    def being_index(self, conn: ViewConnection, nodes: str, being_id: UUID) -> BeingIndex | None:
        """The being's table, or None before it has one (no node yet). A table, once there, stays for
        its generation, whose name it carries."""
        fts = fts_table(nodes, str(being_id))
        return BeingIndex(nodes, being_id, fts) if fts5_tables.exists(conn, fts) else None

    def ranked(
        self,
        conn: ViewConnection,
        being: BeingIndex,
        terms: Sequence[str],
        names: Collection[str],
        limit: int,
        statuses: Sequence[str],
    ) -> RankingPlan:
        phrases = [fts5_phrase(actor_term(t) if t in names else t) for t in terms]
        return fts5_ranking.ranked(conn, being.nodes, being.table, phrases, limit, set(statuses))

    def actor_terms(self, conn: ViewConnection, being: BeingIndex, words: Sequence[str]) -> set[str]:
        """One statement per `ACTOR_LOOKUPS` words: a round trip per word costs more than the lookups,
        each a seek to the word's actor term (ADR 0014)."""
        fts = being.table
        found: set[str] = set()
        for part in chunks(words, ACTOR_LOOKUPS):
            params: list[Any] = []
            for word in part:
                params += [word, fts5_phrase(actor_term(word))]
            rows = conn.query(
                " UNION ALL ".join(
                    f"SELECT ? AS word WHERE EXISTS (SELECT 1 FROM {fts} WHERE {fts} MATCH ?)" for _ in part
                ),
                params,
            )
            found.update(str(r["word"]) for r in rows)
        return found

    def contains(self, terms: Sequence[str], mode: str) -> Condition:
        """GLOB with a class per cased letter (`glob_contains`): SQLite's LOWER and LIKE fold ASCII
        only, so both backends then fold Unicode letters alike."""
        clauses, params = [], []
        for term in terms:
            clauses.append("(action GLOB ? OR feeling GLOB ? OR when_json GLOB ? OR themes GLOB ?)")
            params += [glob_contains(term)] * 3 + [glob_contains(json_string(term))]
        return (" AND " if mode == "and" else " OR ").join(clauses), params

    # -- maintenance ------------------------------------------------------------------------------

    def sizes(self, db: ViewDatabase, projection: Projection) -> list[IndexSize]:
        return fts5_merge.being_indexes(db, projection)

    def merge(
        self, db: ViewDatabase, projection: Projection, being_id: str, *, stopping: Callable[[], bool]
    ) -> int:
        return fts5_merge.merge(db, projection, being_id, stopping=stopping)
