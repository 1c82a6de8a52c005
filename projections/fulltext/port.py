"""The `FullTextIndex` port: a store's own full-text index over the memory view's nodes.

Adapters: SQLite FTS5 (`adapters/fulltext/sqlite_fts5.py`) and PostgreSQL `tsvector`
(`adapters/fulltext/postgres_tsvector.py`); the composition root picks one by backend. Unlike the
vector index, a full-text index lives in the view's own database: every method works on a
connection the caller holds, so the index changes in the view's write transactions (never behind
or ahead of its rows) and a search reads in the reader's snapshot.

Rules every adapter keeps:
- every search is scoped to one being (`BeingIndex`);
- text from a caller reaches a statement only as a bound parameter, quoted by
  `adapters/fulltext/patterns.py`: no query text can change a statement's syntax or widen what it
  matches. Table names come from the view, never from a caller;
- a rebuild's generation is indexed once, after its bulk load (`create`), then kept current.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from engram.projections.engine import Projection
from engram.projections.sql import ViewConnection, ViewDatabase

FTS_COLUMNS = ("action", "actors", "when_json", "feeling", "themes", "setting", "dialogue")
"""The node columns a full-text index covers, in this order (each adapter weighs them)."""

Hits = list[tuple[str, float]]
"""(node id, score), best first."""

Condition = tuple[str, list[Any]]
"""A SQL condition on the node columns and its parameters."""


@dataclass(frozen=True, slots=True)
class BeingIndex:
    """Where one being's rows are indexed: `table` is its own full-text table (SQLite) or `nodes`."""

    nodes: str
    being_id: UUID
    table: str


@dataclass(frozen=True, slots=True)
class IndexSize:
    """One being's full-text table in the active generation, and how many rows it indexes."""

    being_id: str
    table: str
    rows: int


class RankingPlan(NamedTuple):
    """The statements that rank a search (each runs in the planning connection's transaction, on
    any one thread at a time) and how to merge their lists into the answer."""

    statements: list[Callable[[], Hits]]
    merge: Callable[[list[Hits]], Hits]


def best_per_row(lists: list[Hits], limit: int) -> Hits:
    """The best `limit` of the union of ranked lists, each row at its best score (ties by id)."""
    if len(lists) == 1:
        return lists[0][:limit]
    best: dict[str, float] = {}
    for hits in lists:
        for node_id, score in hits:
            if score > best.get(node_id, float("-inf")):
                best[node_id] = score
    return sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]


class FullTextIndex(Protocol):
    # -- kept by the memory view, in its write transactions -------------------------------------

    def create(self, conn: ViewConnection, nodes: str) -> None:
        """Index the rows `nodes` holds (none in a new view; a rebuild's, after its bulk load) and
        keep the index current from now on."""
        ...

    def drop(self, conn: ViewConnection, nodes: str) -> None:
        """Drop what the index holds beside the generation's table `nodes`, before the table goes."""
        ...

    def drop_being(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        """A forgotten being's rows of `nodes` are about to be deleted: drop what indexes them
        (ADR 0077), leaving the index as a rebuild without them would make it."""
        ...

    def forget(self, conn: ViewConnection, nodes: str, keys: Collection[str], *, stored: bool) -> list[str]:
        """Rows `keys` of `nodes` are about to be written whole: take their stored text out of the
        index (`stored` False: none of them is stored yet). Returns the keys `index` takes once they
        are written; none when the index follows the rows by itself."""
        ...

    def index(self, conn: ViewConnection, nodes: str, keys: Sequence[str]) -> None:
        """Index the rows `keys` of `nodes` as written (the keys `forget` returned)."""
        ...

    def compact_after_erasure(self, conn: ViewConnection, nodes: str, being_id: UUID) -> None:
        """Rows of the being left the index for good (an item or a subject forgotten): rewrite what
        still holds their words, so that no file keeps them once the view's files are scrubbed
        (ADR 0089). A store whose index lives in the rows themselves has nothing to do."""
        ...

    # -- searching, in the reader's read transaction ----------------------------------------------

    def being_index(self, conn: ViewConnection, nodes: str, being_id: UUID) -> BeingIndex | None:
        """Where the being's rows of `nodes` are indexed; None before it has any (SQLite). Stays
        valid for the generation `nodes` names."""
        ...

    def ranked(
        self,
        conn: ViewConnection,
        being: BeingIndex,
        terms: Sequence[str],
        names: Collection[str],
        limit: int,
        statuses: Sequence[str],
    ) -> RankingPlan:
        """The `limit` best rows among `statuses` for the OR of `terms` (`query_terms`), by the
        store's relevance (bm25, ts_rank_cd); terms in `names` match the actors field only. The
        cheap statements that plan the ranking run here, in `conn`."""
        ...

    def actor_terms(self, conn: ViewConnection, being: BeingIndex, words: Sequence[str]) -> set[str]:
        """Those of `words` (lower-case) that name one of the being's actors."""
        ...

    def contains(self, terms: Sequence[str], mode: str) -> Condition:
        """The spec's `search_memory` match: each term a case-insensitive substring of action,
        feeling or the JSON text of `when`, or equal to one of the themes; every term (`mode`
        "and") or any. Letters beyond ASCII fold too."""
        ...

    # -- maintenance, outside requests --------------------------------------------------------------

    def sizes(self, db: ViewDatabase, projection: Projection) -> list[IndexSize]:
        """The beings' full-text tables of the active generation that maintenance can merge, in
        being order (none when the store maintains its index itself)."""
        ...

    def merge(
        self, db: ViewDatabase, projection: Projection, being_id: str, *, stopping: Callable[[], bool]
    ) -> int:
        """Merge the being's index in short write transactions; the steps that did any work.
        `stopping` is asked before each step."""
        ...
