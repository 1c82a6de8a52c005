"""`FullTextSearch`: the searches `Reading` makes over the memory view, through its `FullTextIndex`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import TypeVar, cast
from uuid import UUID

from engram.projections.fulltext.overlap import Overlap
from engram.projections.fulltext.port import BeingIndex, FullTextIndex, Hits, RankingPlan, best_per_row
from engram.projections.fulltext.terms import query_terms
from engram.projections.queries import ReadModels
from engram.projections.sql import ViewConnection

T = TypeVar("T")


class FullTextSearch:
    """Ranked full-text search (`lexical`), the actors a query names (`actor_terms`) and the spec's
    keyword match (`keywords`), each scoped to one being.

    Every search reads through `read`: inside `read.snapshot("memory")` it reads in that snapshot,
    with the other reads of the block."""

    def __init__(self, read: ReadModels, index: FullTextIndex, overlap: Overlap) -> None:
        self.read = read
        self.index = index
        self._overlap = overlap
        self._beings: dict[tuple[str, UUID], BeingIndex] = {}

    def _being(self, conn: ViewConnection, nodes: str, being_id: UUID) -> BeingIndex | None:
        """The being's index in the generation `nodes` names, found once per instance."""
        found = self._beings.get((nodes, being_id))
        if found is None:
            found = self.index.being_index(conn, nodes, being_id)
            if found is not None:
                self._beings[(nodes, being_id)] = found
        return found

    def lexical(
        self,
        being_id: UUID,
        text: str,
        limit: int,
        statuses: Sequence[str] = ("active", "dying"),
        *,
        actors: Collection[str] = (),
    ) -> Hits:
        """Node ids ranked by the store's own full-text index (FTS5 bm25 / PostgreSQL ts_rank_cd), best first.

        Terms are ORed: a node matching more of them, rarer ones, ranks higher. English stop words are
        dropped (`query_terms`). Terms in `actors` (names the query shares with the being's actors,
        see `actor_terms`) match the actors field only: "Mina" finds what Mina did, not every line
        that greets her (ADR 0008).
        """
        hits, _ = self._lexical(being_id, text, limit, statuses, actors, None)
        return hits

    def lexical_alongside(
        self,
        alongside: Callable[[], T],
        being_id: UUID,
        text: str,
        limit: int,
        statuses: Sequence[str] = ("active", "dying"),
        *,
        actors: Collection[str] = (),
    ) -> tuple[Hits, T]:
        """`lexical`, and `alongside()` run on this thread while the ranking statements run on a worker
        (ADR 0017). `alongside` must not read the views: their connection is the worker's meanwhile."""
        hits, other = self._lexical(being_id, text, limit, statuses, actors, alongside)
        return hits, cast(T, other)

    def _lexical(
        self,
        being_id: UUID,
        text: str,
        limit: int,
        statuses: Sequence[str],
        actors: Collection[str],
        alongside: Callable[[], T] | None,
    ) -> tuple[Hits, T | None]:
        terms = query_terms(text)
        if not terms or not statuses:
            return [], alongside() if alongside is not None else None
        names = {a.lower() for a in actors}
        with self.read.reading("memory") as (conn, tables):
            being = self._being(conn, tables["nodes"], being_id)
            plan = (
                RankingPlan([], partial(best_per_row, limit=limit))
                if being is None
                else self.index.ranked(conn, being, terms, names, limit, statuses)
            )
            if alongside is None:
                return plan.merge([statement() for statement in plan.statements]), None
            with self.read.lending():
                results, other = self._overlap.run(plan.statements, alongside)
        return plan.merge(results), other

    def actor_terms(self, being_id: UUID, text: str) -> set[str]:
        """The words of `text` that name one of the being's actors (an indexed lookup per word)."""
        words = [t for t in query_terms(text) if not t.isdigit()]
        if not words:
            return set()
        with self.read.reading("memory") as (conn, tables):
            being = self._being(conn, tables["nodes"], being_id)
            return set() if being is None else self.index.actor_terms(conn, being, words)

    def keywords(self, being_id: UUID, terms: Sequence[str], mode: str = "or") -> list[tuple[str, int]]:
        """The spec's `search_memory`: case-insensitive substring match of each term on action, feeling,
        the JSON text of `when`, and element equality on themes; `or` (default) or `and` over the
        terms. Every match's id and `seq`, newest first (`ReadModels.node_keys`)."""
        if not terms:
            return []
        return self.read.node_keys(being_id, self.index.contains(terms, mode))
