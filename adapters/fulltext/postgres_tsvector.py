"""`FullTextIndex` on PostgreSQL: a generated `tsvector` column of the nodes table, with a GIN index.

The column is computed from the row by PostgreSQL itself, so the index follows every write with
nothing to do here, and GIN maintains itself (no merge). Weights: A the action, B the actors and
the `when` text (a name matches there only, ADR 0008), C the rest; `ts_rank_cd` ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial
from uuid import UUID

from engram.adapters.fulltext.patterns import json_string, like_contains, tsquery_any, tsquery_lexeme
from engram.projections.engine import Projection
from engram.projections.fulltext.port import BeingIndex, Condition, Hits, IndexSize, RankingPlan, best_per_row
from engram.projections.sql import ViewConnection, ViewDatabase

ACTORS = "B"
"""The weight that holds the actors (and the `when` text)."""


def _ranked(
    conn: ViewConnection,
    nodes: str,
    being_id: UUID,
    terms: Sequence[str],
    names: Collection[str],
    limit: int,
    statuses: Sequence[str],
) -> Hits:
    """ts_rank_cd top `limit` for the OR of `terms`; names match under weight B only."""
    marks = ", ".join("?" for _ in statuses)
    found = conn.query(
        f"SELECT id, ts_rank_cd(tsv, q) AS score FROM {nodes}, "
        f"to_tsquery('english', ?) q WHERE being_id = ? AND status IN ({marks}) AND tsv @@ q "
        "ORDER BY score DESC, id LIMIT ?",
        [tsquery_any(terms, names, ACTORS), str(being_id), *statuses, limit],
    )
    return [(str(r["id"]), float(r["score"])) for r in found]


class PostgresFullText:
    # -- kept by the memory view ------------------------------------------------------------------

    def create(self, conn: ViewConnection, nodes: str) -> None:
        conn.execute(
            f"ALTER TABLE {nodes} ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english', coalesce(action, '')), 'A') || "
            "setweight(to_tsvector('english', coalesce(actors, '') || ' ' || coalesce(when_json, '')), 'B') || "
            "setweight(to_tsvector('english', coalesce(feeling, '') || ' ' || coalesce(themes, '') || ' ' || "
            "coalesce(setting, '') || ' ' || coalesce(dialogue, '')), 'C')) STORED"
        )
        conn.execute(f"CREATE INDEX IF NOT EXISTS {nodes}_tsv ON {nodes} USING GIN (tsv)")

    def drop(self, conn: ViewConnection, nodes: str) -> None:
        """The column and its index go with the table."""

    def drop_being(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        """The generated column goes with the rows."""

    def forget(self, conn: ViewConnection, nodes: str, keys: Collection[str], *, stored: bool) -> list[str]:
        return []  # the generated column follows the row

    def index(self, conn: ViewConnection, nodes: str, keys: Sequence[str]) -> None:
        """Nothing to do: the generated column follows the row."""

    def compact_after_erasure(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        """Nothing to do: the column and its GIN entries go with the rows, and the erasure's table
        scrub rewrites the table and its indexes."""

    # -- searching --------------------------------------------------------------------------------

    def being_index(self, conn: ViewConnection, nodes: str, being_id: UUID) -> BeingIndex | None:
        return BeingIndex(nodes, being_id, nodes)

    def ranked(
        self,
        conn: ViewConnection,
        being: BeingIndex,
        terms: Sequence[str],
        names: Collection[str],
        limit: int,
        statuses: Sequence[str],
    ) -> RankingPlan:
        return RankingPlan(
            [partial(_ranked, conn, being.nodes, being.being_id, terms, names, limit, statuses)],
            partial(best_per_row, limit=limit),
        )

    def actor_terms(self, conn: ViewConnection, being: BeingIndex, words: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for word in words:
            hit = conn.query_one(
                f"SELECT 1 AS hit FROM {being.nodes} WHERE being_id = ? "
                "AND tsv @@ to_tsquery('english', ?) LIMIT 1",
                [str(being.being_id), tsquery_lexeme(word, ACTORS)],
            )
            if hit is not None:
                found.add(word)
        return found

    def contains(self, terms: Sequence[str], mode: str) -> Condition:
        clauses, params = [], []
        for term in terms:
            like, theme = like_contains(term.lower()), like_contains(json_string(term).lower())
            clauses.append(
                "(LOWER(action) LIKE ? ESCAPE '\\' OR LOWER(feeling) LIKE ? ESCAPE '\\' "
                "OR LOWER(when_json) LIKE ? ESCAPE '\\' OR LOWER(themes) LIKE ? ESCAPE '\\')"
            )
            params += [like, like, like, theme]
        return (" AND " if mode == "and" else " OR ").join(clauses), params

    # -- maintenance ------------------------------------------------------------------------------

    def sizes(self, db: ViewDatabase, projection: Projection) -> list[IndexSize]:
        return []  # GIN maintains itself

    def merge(
        self, db: ViewDatabase, projection: Projection, being_id: str, *, stopping: Callable[[], bool]
    ) -> int:
        return 0
