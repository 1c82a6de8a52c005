"""Queries on the SQL views. Every query that reads memory takes the being it is scoped to.

Queries read the active generation of each view, so a rebuild's switch is seen at the next call.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any, TypeVar, cast
from uuid import UUID

import numpy as np
import numpy.typing as npt

from engram.projections import engine
from engram.projections.beings import BEINGS, DIARY
from engram.projections.memory import CLUSTERS, FTS_COLUMNS, NODES, actor_term, fts_table
from engram.projections.notes import NOTES
from engram.projections.overlap import Overlap
from engram.projections.patrol_runs import RUNS
from engram.projections.ranking_cache import BeingRanking, RankingCache
from engram.projections.sql import ViewConnection, ViewDatabase, chunks
from engram.projections.tables import TableSpec
from engram.projections.vectors import VECTOR_NODES

Row = dict[str, Any]
T = TypeVar("T")

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
"""PostgreSQL's `english` stop words (Snowball): `lexical` drops them on both backends, so SQLite's
full-text index neither ranks a node for sharing "the" with the query nor scores every node for it."""

FTS_WEIGHTS = dict(zip(FTS_COLUMNS, (1.0, 1.0, 0.6, 0.4, 0.6, 0.3, 0.4), strict=True)).values()
"""bm25 column weights: action and actors count most (names match the actors only, see `lexical`); when
and the themes next; feeling, setting, dialogue least."""


def query_terms(text: str) -> list[str]:
    """The words `lexical` searches for: lower-cased, deduplicated, without stop words and 1-letter words."""
    return list(
        dict.fromkeys(
            t for t in WORD.findall(text.lower()) if (len(t) > 1 or t.isdigit()) and t not in STOPWORDS
        )
    )


def _decode_node(row: Row) -> Row:
    row = NODES.normalise(row)
    row["themes"] = json.loads(row["themes"]) if row.get("themes") else []
    row["scene"] = json.loads(row.pop("scene_json")) if row.get("scene_json") else {}
    row["emotion"] = json.loads(row.pop("emotion_json")) if row.get("emotion_json") else None
    return row


Hits = list[tuple[str, float]]


def _padded(values: Sequence[T], step: int = 16) -> list[T]:
    """`values` with its last one repeated up to a multiple of `step`: a statement with a list of
    values then has one of a few texts, which the connection keeps prepared (a repeat selects nothing
    more)."""
    out = list(values)
    if out:
        out += [out[-1]] * (-len(out) % step)
    return out


def _like(text: str) -> str:
    """`%text%` for LIKE … ESCAPE '\\'."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _glob_ci(text: str) -> str:
    """`*text*` for SQLite GLOB, each cased letter a class of its case variants, wildcards literal."""
    out = []
    for c in text:
        if c in "*?[":
            out.append(f"[{c}]")
            continue
        variants = sorted({v for v in (c, c.lower(), c.upper()) if len(v) == 1})
        out.append(f"[{''.join(variants)}]" if len(variants) > 1 else c)
    return "*" + "".join(out) + "*"


def _scoped(column: str, db: ViewDatabase, by_id: bool) -> str:
    """`column = ?`; for a lookup by id on SQLite, `+column = ?`.

    The views carry no planner statistics, and SQLite then prefers an index on (being_id, …) to the
    primary key: it would scan all of a being's rows to find a few ids. The unary plus keeps the
    condition (tenancy) but takes it out of index selection, so the primary key drives.
    """
    return f"+{column} = ?" if by_id and db.dialect == "sqlite" else f"{column} = ?"


_BM25_RANK = "bm25(" + ", ".join(str(w) for w in FTS_WEIGHTS) + ")"
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
    conn: Any,
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


def _postings(conn: Any, fts: str, phrases: Sequence[str], cap: int) -> list[int]:
    """How many rows match each phrase, counted up to `cap` (one statement; each count stops there)."""
    rows = conn.query(
        "SELECT "
        + ", ".join(
            f"(SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT {int(cap)})) AS n{i}"
            for i in range(len(phrases))
        ),
        list(phrases),
    )
    return [int(rows[0][f"n{i}"]) for i in range(len(phrases))]


def _fts_ranked(
    conn: Any,
    nodes: str,
    fts: str,
    phrases: Sequence[str],
    limit: int,
    statuses: set[str],
) -> tuple[list[Callable[[], Hits]], Callable[[list[Hits]], Hits]]:
    """bm25 top `limit` for the OR of `phrases`, with the work bounded by the being's index (ADR 0012),
    as the statements that rank (to run in `conn`'s transaction, in any thread, ADR 0017) and how to
    merge their lists. The cheap statements that plan them run here.

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
    merge = partial(_best_per_row, limit=limit)
    if not present:
        return [], merge
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
        return [top(" OR ".join(selective))], merge
    any_common = " OR ".join(common)
    floor = conn.query_one(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        [any_common, LEXICAL_WINDOW - 1],
    )
    # The common terms' statements first: their bm25 walks every posting of those terms.
    jobs = [top(any_common, None if floor is None else floor["rowid"])]
    if selective:
        any_selective = " OR ".join(selective)
        jobs += [top(f"({any_selective}) AND ({any_common})"), top(any_selective)]
    return jobs, merge


def _best_per_row(lists: list[Hits], limit: int) -> Hits:
    """The best `limit` of the union of ranked lists, each row at its best score (ties by id)."""
    if len(lists) == 1:
        return lists[0][:limit]
    best: dict[str, float] = {}
    for hits in lists:
        for node_id, score in hits:
            if score > best.get(node_id, float("-inf")):
                best[node_id] = score
    return sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]


def _ts_ranked(
    conn: Any,
    nodes: str,
    being_id: UUID,
    terms: Sequence[str],
    names: Collection[str],
    limit: int,
    statuses: Sequence[str],
) -> Hits:
    """PostgreSQL's ts_rank_cd top `limit` for the OR of `terms`; weight B holds the actors (and the
    `when` text): names match there only."""
    marks = ", ".join("?" for _ in statuses)
    found = conn.query(
        f"SELECT id, ts_rank_cd(tsv, q) AS score FROM {nodes}, "
        f"to_tsquery('english', ?) q WHERE being_id = ? AND status IN ({marks}) AND tsv @@ q "
        "ORDER BY score DESC, id LIMIT ?",
        [" | ".join(f"{t}:B" if t in names else t for t in terms), str(being_id), *statuses, limit],
    )
    return [(str(r["id"]), float(r["score"])) for r in found]


def _being_fts(conn: Any, nodes: str, being_id: UUID) -> str | None:
    """The being's full-text table, or None before it has one (no node yet)."""
    fts = fts_table(nodes, str(being_id))
    found = conn.query_one("SELECT 1 AS hit FROM sqlite_master WHERE type = 'table' AND name = ?", [fts])
    return fts if found is not None else None


class ReadModels:
    """Read access to the views of one deployment (`Views.dbs`)."""

    def __init__(
        self,
        dbs: dict[str, ViewDatabase],
        projections: dict[str, engine.Projection],
        ranking: RankingCache | None = None,
        overlap: Overlap | None = None,
    ) -> None:
        self.dbs = dbs
        self.projections = projections
        self._ranking = ranking if ranking is not None else RankingCache()
        self._overlap = overlap if overlap is not None else Overlap()
        self._local = threading.local()  # each thread's held snapshots (see `_held`)
        self._fts: dict[tuple[str, UUID], str] = {}

    @property
    def _held(self) -> dict[str, tuple[ViewConnection, dict[str, str]]]:
        """This thread's held read transactions by view: a snapshot is its opening thread's alone,
        when threads share a `ReadModels`."""
        held: dict[str, tuple[ViewConnection, dict[str, str]]] | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = {}
        return held

    def _not_lent(self) -> None:
        if getattr(self._local, "lent", False):
            raise RuntimeError("no reads in `lexical_alongside`'s alongside: the connection is the worker's")

    @contextmanager
    def snapshot(self, *views: str) -> Iterator[ReadModels]:
        """Hold one read transaction per view in `views` for the block: every read of them inside
        sees the same state, and the transaction and the active tables' lookup are paid once (a
        `query` makes half a dozen reads)."""
        self._not_lent()
        held = self._held
        with ExitStack() as stack:
            for view in views:
                if view not in held:
                    db = self.dbs[view]
                    conn = stack.enter_context(db.read())
                    held[view] = (conn, engine.read_tables(conn, db, self.projections[view]))
                    stack.callback(held.pop, view)
            yield self

    @contextmanager
    def _reading(self, view: str) -> Iterator[tuple[ViewConnection, dict[str, str]]]:
        """A connection in a read transaction on `view` and its active tables: the snapshot's if one
        is held, else a transaction of its own."""
        self._not_lent()
        held = self._held.get(view)
        if held is not None:
            yield held
            return
        db = self.dbs[view]
        with db.read() as conn:
            yield conn, engine.read_tables(conn, db, self.projections[view])

    def _being_fts(self, conn: ViewConnection, nodes: str, being_id: UUID) -> str | None:
        """The being's full-text table, or None before it has one (no node yet). Found once per
        instance: a table, once there, stays for its generation, whose name it carries."""
        fts = self._fts.get((nodes, being_id))
        if fts is None:
            fts = _being_fts(conn, nodes, being_id)
            if fts is not None:
                self._fts[(nodes, being_id)] = fts
        return fts

    def _select(
        self, view: str, spec: TableSpec, where: str, params: Sequence[Any], tail: str = ""
    ) -> list[Row]:
        with self._reading(view) as (conn, tables):
            table = tables[spec.name]
            rows = conn.query(f"SELECT {spec.select_list} FROM {table} WHERE {where} {tail}", list(params))
        return [spec.normalise(r) for r in rows]

    # -- beings ---------------------------------------------------------------------------------

    def being(self, being_id: UUID) -> Row | None:
        rows = self._select("beings", BEINGS, "id = ?", [str(being_id)])
        return rows[0] if rows else None

    def being_by_name(self, name: str) -> Row | None:
        rows = self._select("beings", BEINGS, "name = ?", [name])
        return rows[0] if rows else None

    def beings(self) -> list[Row]:
        return self._select("beings", BEINGS, "1 = 1", [], "ORDER BY registered_at, name")

    def diary(self, being_id: UUID, since: str | None = None) -> list[Row]:
        return self._select(
            "beings", DIARY, "being_id = ? AND date >= ?", [str(being_id), since or ""], "ORDER BY date"
        )

    # -- memory ---------------------------------------------------------------------------------

    def node(self, being_id: UUID, node_id: UUID) -> Row | None:
        rows = self._select("memory", NODES, "being_id = ? AND id = ?", [str(being_id), str(node_id)])
        return _decode_node(rows[0]) if rows else None

    def nodes(
        self,
        being_id: UUID,
        *,
        statuses: Sequence[str] | None = None,
        cluster_id: UUID | None = None,
        fresh: bool | None = None,
        ids: Sequence[UUID] | None = None,
        created_since: str | None = None,
        order: str = "created_at",
        limit: int | None = None,
    ) -> list[Row]:
        where: list[str] = [_scoped("being_id", self.dbs["memory"], ids is not None)]
        params: list[Any] = [str(being_id)]
        if statuses:
            where.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params += list(statuses)
        if cluster_id is not None:
            where.append("cluster_id = ?")
            params.append(str(cluster_id))
        if fresh is not None:
            where.append("fresh = ?")
            params.append(fresh)
        if ids is not None:
            if not ids:
                return []
            padded = _padded([str(i) for i in ids])
            where.append(f"id IN ({', '.join('?' for _ in padded)})")
            params += padded
        if created_since is not None:
            where.append("created_at >= ?")
            params.append(created_since)
        order_by = {"created_at": "created_at, id", "recent": "last_activated_at DESC, id"}[order]
        tail = f"ORDER BY {order_by}" + (f" LIMIT {int(limit)}" if limit else "")
        return [_decode_node(r) for r in self._select("memory", NODES, " AND ".join(where), params, tail)]

    def dying_candidates(self, being_id: UUID, cycle: int) -> list[Row]:
        """Spec ❸: active, unpinned nodes whose effective importance is ≤ 0.05 at `cycle` (indexed)."""
        rows = self._select(
            "memory",
            NODES,
            "being_id = ? AND status = 'active' AND pinned = ? AND dying_cycle <= ?",
            [str(being_id), False, cycle],
            "ORDER BY dying_cycle, id",
        )
        return [_decode_node(r) for r in rows]

    def revivable(self, being_id: UUID, cycle: int) -> list[Row]:
        """Spec ❺: dead nodes read since they died whose effective importance is above 0.05 at `cycle`."""
        rows = self._select(
            "memory",
            NODES,
            "being_id = ? AND status = 'dead' AND read_since_death = ? AND dying_cycle > ?",
            [str(being_id), True, cycle],
            "ORDER BY id",
        )
        return [_decode_node(r) for r in rows]

    def cluster(self, being_id: UUID, cluster_id: UUID) -> Row | None:
        rows = self._select("memory", CLUSTERS, "being_id = ? AND id = ?", [str(being_id), str(cluster_id)])
        return rows[0] if rows else None

    def clusters(self, being_id: UUID) -> list[Row]:
        return self._select(
            "memory", CLUSTERS, "being_id = ?", [str(being_id)], "ORDER BY is_root DESC, created_at, id"
        )

    def node_vectors(self, being_id: UUID, ids: Sequence[UUID | str]) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors of embedded nodes, from the vector view's SQL copy (no index round trip)."""
        out: dict[str, npt.NDArray[np.float32]] = {}
        for part in chunks([str(i) for i in ids], 500):
            marks = ", ".join("?" for _ in part)
            rows = self._select(
                "vectors",
                VECTOR_NODES,
                f"{_scoped('being_id', self.dbs['vectors'], True)} AND id IN ({marks})",
                [str(being_id), *part],
            )
            for r in rows:
                if r["vector"] is not None:
                    out[r["id"]] = np.frombuffer(r["vector"], dtype="<f4").astype(np.float32)
        return out

    def vector_models(self, kind: str = "nodes") -> list[str]:
        """The embedding models with a collection of `kind` (`nodes`, `centroids`) in the active generation."""
        with self._reading("vectors") as (conn, tables):
            table = tables["collections"]
            rows = conn.query(f"SELECT model FROM {table} WHERE kind = ? ORDER BY model", [kind])
        return [str(r["model"]) for r in rows]

    def children(self, being_id: UUID, cluster_id: UUID | str) -> list[Row]:
        return self._select(
            "memory",
            CLUSTERS,
            "being_id = ? AND parent_id = ? AND id <> parent_id",
            [str(being_id), str(cluster_id)],
            "ORDER BY created_at, id",
        )

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
        dropped (PostgreSQL's `english` configuration drops them anyway). Terms in `actors` (names the
        query shares with the being's actors, see `actor_terms`) match the actors field only: "Mina"
        finds what Mina did, not every line that greets her (ADR 0008).
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
        db = self.dbs["memory"]
        with self._reading("memory") as (conn, tables):
            nodes = tables["nodes"]
            jobs: list[Callable[[], Hits]] = []
            merge: Callable[[list[Hits]], Hits] = partial(_best_per_row, limit=limit)
            if db.dialect == "sqlite":
                fts = self._being_fts(conn, nodes, being_id)
                if fts is not None:
                    phrases = [f'"{actor_term(t)}"' if t in names else f'"{t}"' for t in terms]
                    jobs, merge = _fts_ranked(conn, nodes, fts, phrases, limit, set(statuses))
            else:
                jobs = [partial(_ts_ranked, conn, nodes, being_id, terms, names, limit, statuses)]
            if alongside is None:
                return merge([job() for job in jobs]), None
            self._local.lent = True
            try:
                results, other = self._overlap.run(jobs, alongside)
            finally:
                self._local.lent = False
        return merge(results), other

    def actor_terms(self, being_id: UUID, text: str) -> set[str]:
        """The words of `text` that name one of the being's actors (an indexed lookup per word)."""
        words = [t for t in query_terms(text) if not t.isdigit()]
        if not words:
            return set()
        db = self.dbs["memory"]
        found: set[str] = set()
        with self._reading("memory") as (conn, tables):
            nodes = tables["nodes"]
            if db.dialect == "sqlite":  # one statement: a round trip per word costs more than the lookups
                fts = self._being_fts(conn, nodes, being_id)
                if fts is None:
                    return set()
                for part in chunks(words, 200):  # SQLite allows 500 terms in a compound SELECT
                    params: list[Any] = []
                    for word in part:  # a seek to the word's actor term (ADR 0014)
                        params += [word, f'"{actor_term(word)}"']
                    rows = conn.query(
                        " UNION ALL ".join(
                            f"SELECT ? AS word WHERE EXISTS (SELECT 1 FROM {fts} WHERE {fts} MATCH ?)"
                            for _ in part
                        ),
                        params,
                    )
                    found.update(str(r["word"]) for r in rows)
                return found
            for word in words:
                hit = conn.query_one(
                    f"SELECT 1 AS hit FROM {nodes} WHERE being_id = ? "
                    "AND tsv @@ to_tsquery('english', ?) LIMIT 1",
                    [str(being_id), f"{word}:B"],
                )
                if hit is not None:
                    found.add(word)
        return found

    def ranking(self, being_id: UUID) -> BeingRanking:
        """What `query` ranks on for the being's nodes (`RankingCache`), at least as new as this
        read's state of the memory view."""
        db, projection = self.dbs["memory"], self.projections["memory"]
        with self._reading("memory") as (conn, tables):
            _, position = engine.active_position(conn, db, projection)
            return self._ranking.current(conn, db.dialect, tables["nodes"], being_id, position)

    def search(self, being_id: UUID, terms: Sequence[str], mode: str = "or", limit: int = 50) -> list[Row]:
        """The spec's `search_memory`: case-insensitive substring match of each term on action, feeling,
        the JSON text of `when`, and element equality on themes; `or` (default) or `and` over the terms.

        SQLite's LOWER and LIKE fold ASCII only, so there each term becomes a GLOB pattern with a
        character class per cased letter (`Über` → `*[Üü][Bb][Ee][Rr]*`): both backends then fold
        Unicode letters alike.
        """
        sqlite = self.dbs["memory"].dialect == "sqlite"
        clauses, params = [], []
        for term in terms:
            quoted = json.dumps(term, ensure_ascii=False)  # a theme is one JSON string in the array
            if sqlite:
                clauses.append("(action GLOB ? OR feeling GLOB ? OR when_json GLOB ? OR themes GLOB ?)")
                params += [_glob_ci(term)] * 3 + [_glob_ci(quoted)]
            else:
                like, theme = _like(term.lower()), _like(quoted.lower())
                clauses.append(
                    "(LOWER(action) LIKE ? ESCAPE '\\' OR LOWER(feeling) LIKE ? ESCAPE '\\' "
                    "OR LOWER(when_json) LIKE ? ESCAPE '\\' OR LOWER(themes) LIKE ? ESCAPE '\\')"
                )
                params += [like, like, like, theme]
        if not clauses:
            return []
        joined = (" AND " if mode == "and" else " OR ").join(clauses)
        rows = self._select(
            "memory",
            NODES,
            f"being_id = ? AND ({joined})",
            [str(being_id), *params],
            f"ORDER BY last_activated_at DESC, id LIMIT {int(limit)}",
        )
        return [_decode_node(r) for r in rows]

    # -- notes ----------------------------------------------------------------------------------

    def notes(
        self,
        being_id: UUID,
        *,
        kinds: Sequence[str] | None = None,
        parse_status: str | None = None,
        read: bool | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        where: list[str] = ["being_id = ?"]
        params: list[Any] = [str(being_id)]
        if kinds:
            where.append(f"kind IN ({', '.join('?' for _ in kinds)})")
            params += list(kinds)
        if parse_status is not None:
            where.append("parse_status = ?")
            params.append(parse_status)
        if read is not None:
            where.append("read = ?")
            params.append(read)
        tail = "ORDER BY position" + (f" LIMIT {int(limit)}" if limit else "")
        return self._select("notes", NOTES, " AND ".join(where), params, tail)

    def pending_scene_counts(self) -> dict[str, int]:
        """Unprocessed scene notes per being (what the worker's patrol schedule looks at)."""
        with self._reading("notes") as (conn, tables):
            table = tables["notes"]
            rows = conn.query(
                f"SELECT being_id, COUNT(*) AS n FROM {table} WHERE kind = 'scene' AND parse_status = 'pending' "
                "GROUP BY being_id"
            )
        return {str(r["being_id"]): int(r["n"]) for r in rows}

    # -- patrol runs ----------------------------------------------------------------------------

    def patrol_runs(self, being_id: UUID, limit: int = 20) -> list[Row]:
        rows = self._select(
            "patrol_runs", RUNS, "being_id = ?", [str(being_id)], f"ORDER BY cycle DESC LIMIT {int(limit)}"
        )
        for r in rows:
            r["steps"] = json.loads(r.pop("steps_json"))
        return rows
