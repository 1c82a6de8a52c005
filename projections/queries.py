"""Queries on the SQL views. Every query that reads memory takes the being it is scoped to.

Queries read the active generation of each view, so a rebuild's switch is seen at the next call.
Searching text is `projections/fulltext/`'s work, ranking `services/ranking.py`'s; both read through
a `ReadModels` (`reading`), so a `snapshot` holds their reads too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
import numpy.typing as npt

from engram.domain.note import Sensitivity
from engram.projections import engine
from engram.projections.beings import BEINGS, DIARY
from engram.projections.fulltext.port import Condition
from engram.projections.memory import CLUSTERS, NODES
from engram.projections.notes import NOTE_TAGS, NOTES
from engram.projections.patrol_runs import RUNS
from engram.projections.ranking_cache import BeingRanking, RankingCache
from engram.projections.sql import ViewConnection, ViewDatabase, chunks
from engram.projections.tables import TableSpec
from engram.projections.vectors import VECTOR_NODES

Row = dict[str, Any]


def _active_note(table: str = "") -> str:
    """A note neither superseded nor past its expiry at the parameter's instant (`utc_text`, ADR 0046);
    `table`: the alias its columns are read through."""
    t = f"{table}." if table else ""
    return f"{t}superseded_by IS NULL AND ({t}expires_at IS NULL OR {t}expires_at > ?)"


_ACTIVE_NOTE = _active_note()
T = TypeVar("T")


def _decode_node(row: Row) -> Row:
    row = NODES.normalise(row)
    row["themes"] = json.loads(row["themes"]) if row.get("themes") else []
    row["scene"] = json.loads(row.pop("scene_json")) if row.get("scene_json") else {}
    row["emotion"] = json.loads(row.pop("emotion_json")) if row.get("emotion_json") else None
    return row


def _padded(values: Sequence[T], step: int = 16) -> list[T]:
    """`values` with its last one repeated up to a multiple of `step`: a statement with a list of
    values then has one of a few texts, which the connection keeps prepared (a repeat selects nothing
    more)."""
    out = list(values)
    if out:
        out += [out[-1]] * (-len(out) % step)
    return out


def _scoped(column: str, db: ViewDatabase, by_id: bool) -> str:
    """`column = ?`; for a lookup by id on SQLite, `+column = ?`.

    The views carry no planner statistics, and SQLite then prefers an index on (being_id, …) to the
    primary key: it would scan all of a being's rows to find a few ids. The unary plus keeps the
    condition (tenancy) but takes it out of index selection, so the primary key drives.
    """
    return f"+{column} = ?" if by_id and db.dialect == "sqlite" else f"{column} = ?"


class ReadModels:
    """Read access to the views of one deployment (`Views.dbs`)."""

    def __init__(
        self,
        dbs: dict[str, ViewDatabase],
        projections: dict[str, engine.Projection],
        ranking: RankingCache | None = None,
    ) -> None:
        self.dbs = dbs
        self.projections = projections
        self._ranking = ranking if ranking is not None else RankingCache()
        self._local = threading.local()  # each thread's held snapshots (see `_held`) and lending

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
    def lending(self) -> Iterator[None]:
        """This thread's connections are lent to a worker for the block (ADR 0017): a read through
        this instance on this thread meanwhile raises instead of sharing one."""
        self._local.lent = True
        try:
            yield
        finally:
            self._local.lent = False

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
    def reading(self, view: str) -> Iterator[tuple[ViewConnection, dict[str, str]]]:
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

    def _select(
        self, view: str, spec: TableSpec, where: str, params: Sequence[Any], tail: str = ""
    ) -> list[Row]:
        with self.reading(view) as (conn, tables):
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
        where: Condition | None = None,
    ) -> list[Row]:
        """The being's nodes, filtered; `where`: a condition on their columns and its parameters
        (the full-text index's keyword match, `FullTextIndex.contains`)."""
        conditions = [_scoped("being_id", self.dbs["memory"], ids is not None)]
        params: list[Any] = [str(being_id)]
        if statuses:
            conditions.append(f"status IN ({', '.join('?' for _ in statuses)})")
            params += list(statuses)
        if cluster_id is not None:
            conditions.append("cluster_id = ?")
            params.append(str(cluster_id))
        if fresh is not None:
            conditions.append("fresh = ?")
            params.append(fresh)
        if ids is not None:
            if not ids:
                return []
            padded = _padded([str(i) for i in ids])
            conditions.append(f"id IN ({', '.join('?' for _ in padded)})")
            params += padded
        if created_since is not None:
            conditions.append("created_at >= ?")
            params.append(created_since)
        if where is not None:
            conditions.append(f"({where[0]})")
            params += where[1]
        order_by = {
            "created_at": "created_at, id",
            "recent": "last_activated_at DESC, id",
            "seq": "seq",  # the order they were noted, on the index `sequence` (a page of a large cluster)
        }[order]
        tail = f"ORDER BY {order_by}" + (f" LIMIT {int(limit)}" if limit else "")
        return [
            _decode_node(r) for r in self._select("memory", NODES, " AND ".join(conditions), params, tail)
        ]

    def node_keys(self, being_id: UUID, where: Condition) -> list[tuple[str, int]]:
        """The id and `seq` (the log position that created it) of every node of the being matching
        `where`, newest first: a whole match, read without the rows' text."""
        with self.reading("memory") as (conn, tables):
            rows = conn.query(
                f"SELECT id, seq FROM {tables['nodes']} WHERE being_id = ? AND ({where[0]}) "
                "ORDER BY seq DESC, id",
                [str(being_id), *where[1]],
            )
        return [(str(r["id"]), int(r["seq"])) for r in rows]

    @staticmethod
    def visible(now: str, *, include_sensitive: bool = False) -> Condition:
        """The nodes a node list shows at `now` (`utc_text`): not past their expiry, and not sensitive
        unless `include_sensitive` (an admin token, the CLI's `--include-sensitive`; ADR 0046)."""
        unexpired = "(expires_at IS NULL OR expires_at > ?)"
        return (unexpired if include_sensitive else f"NOT sensitive AND {unexpired}"), [now]

    def hidden_nodes(self, being_id: UUID, now: str) -> set[str]:
        """The ids of the being's nodes that reads leave out at `now` (`utc_text`): sensitive, or past
        their expiry (ADR 0046). Read through the partial index `hidden`, in O(such nodes)."""
        with self.reading("memory") as (conn, tables):
            rows = conn.query(
                f"SELECT id FROM {tables['nodes']} WHERE being_id = ? "
                "AND (sensitive OR expires_at IS NOT NULL) AND (sensitive OR expires_at <= ?)",
                [str(being_id), now],
            )
        return {str(r["id"]) for r in rows}

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

    def revivable(self, being_id: UUID) -> list[Row]:
        """Spec ❺: dead nodes read since they died whose effective importance is above 0.05 with the
        session count of 0 the read gave them (`decay.revives`): their dying cycle is after the read's."""
        rows = self._select(
            "memory",
            NODES,
            "being_id = ? AND status = 'dead' AND read_since_death = ? AND dying_cycle > last_activated_cycle",
            [str(being_id), True],
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
        with self.reading("vectors") as (conn, tables):
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

    def ranking(self, being_id: UUID) -> BeingRanking:
        """What `query` ranks on for the being's nodes (`RankingCache`), at least as new as this
        read's state of the memory view."""
        db, projection = self.dbs["memory"], self.projections["memory"]
        with self.reading("memory") as (conn, tables):
            _, position = engine.active_position(conn, db, projection)
            return self._ranking.current(conn, db.dialect, tables["nodes"], being_id, position)

    # -- notes ----------------------------------------------------------------------------------

    def notes(
        self,
        being_id: UUID,
        *,
        kinds: Sequence[str] | None = None,
        parse_status: str | None = None,
        read: bool | None = None,
        limit: int | None = None,
        active_at: str | None = None,
    ) -> list[Row]:
        """The being's notes in log order. `active_at` (`utc_text`): only those neither superseded nor
        past their expiry then (ADR 0046)."""
        where: list[str] = ["being_id = ?"]
        params: list[Any] = [str(being_id)]
        if active_at is not None:
            where.append(_ACTIVE_NOTE)
            params.append(active_at)
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

    def listed_notes(self, being_id: UUID, **filters: Any) -> list[Row]:
        """`engram notes list` (`listed_notes_sql` holds the filters)."""
        with self.reading("notes") as (conn, tables):
            sql, params = listed_notes_sql(tables[NOTES.name], tables[NOTE_TAGS.name], being_id, **filters)
            rows = conn.query(sql, params)
        return [NOTES.normalise(r) for r in rows]

    def notes_due(self, now: str, *, after: tuple[str, str] | None = None, limit: int = 500) -> list[Row]:
        """Notes of every being whose `expires_at` (`utc_text`) is at or before `now` and whose expiry
        is not recorded yet, by `expires_at` then id, from after `after` (the last row of the batch
        before: a sweep moves on without waiting for the view to see what it recorded). Read through
        the partial index `notes_due`, so the cost follows the notes due, not the notes stored."""
        where = "expires_at IS NOT NULL AND NOT expired AND expires_at <= ?"
        params: list[Any] = [now]
        if after is not None:
            where += " AND (expires_at, id) > (?, ?)"
            params += [after[0], after[1]]
        with self.reading("notes") as (conn, tables):
            rows = conn.query(
                f"SELECT id, being_id, expires_at FROM {tables['notes']} WHERE {where} "
                f"ORDER BY expires_at, id LIMIT {int(limit)}",
                params,
            )
        return [dict(r) for r in rows]

    def volatile_without_ttl(
        self, before: str, *, being_id: UUID | None = None, limit: int = 5000
    ) -> list[Row]:
        """Volatile notes without `ttl_days`, not superseded, that happened before `before`
        (`utc_text`), of every being: what the worker's maintenance merges (ADR 0048). Ordered so that
        notes of one being, scope, kind and sensitivity come together, oldest first."""
        with self.reading("notes") as (conn, tables):
            rows = conn.query(
                f"SELECT id, being_id, scope, kind, sensitivity, at FROM {tables['notes']} "
                "WHERE stability = 'volatile' AND ttl_days IS NULL AND superseded_by IS NULL "
                "AND kind <> 'scene' AND at < ?"
                + (" AND being_id = ?" if being_id is not None else "")
                + f" ORDER BY being_id, scope, kind, sensitivity, at, id LIMIT {int(limit)}",
                [before] + ([str(being_id)] if being_id is not None else []),
            )
        return [dict(r) for r in rows]

    def notes_by_id(self, being_id: UUID, ids: Sequence[str]) -> dict[str, Row]:
        """The being's notes among `ids`, by id (another being's read as missing)."""
        out: dict[str, Row] = {}
        for part in chunks(list(ids), 500):
            marks = ", ".join("?" for _ in part)
            rows = self._select("notes", NOTES, f"being_id = ? AND id IN ({marks})", [str(being_id), *part])
            out.update((str(r["id"]), r) for r in rows)
        return out

    def pack_notes(self, being_id: UUID, now: str, limit: int) -> list[Row]:
        """The context pack without a query (ADR 0049): the being's `limit` most recent notes by `at`
        that are live at `now` (neither superseded nor expired), enabled, not sensitive and not
        scenes. Read newest first through the (being_id, at) index, so it stops after `limit` rows
        when most notes are live."""
        return self._select(
            "notes",
            NOTES,
            f"being_id = ? AND kind <> 'scene' AND {_ACTIVE_NOTE} AND enabled = ? AND sensitivity <> 'sensitive'",
            [str(being_id), now, True],
            f"ORDER BY at DESC, id LIMIT {int(limit)}",
        )

    def pending_scene_counts(self, active_at: str | None = None) -> dict[str, int]:
        """Unprocessed scene notes per being (what the worker's patrol schedule looks at); with
        `active_at`, those patrol still takes up then (neither superseded nor expired)."""
        active = f" AND {_ACTIVE_NOTE}" if active_at is not None else ""
        with self.reading("notes") as (conn, tables):
            table = tables["notes"]
            rows = conn.query(
                f"SELECT being_id, COUNT(*) AS n FROM {table} WHERE kind = 'scene' AND parse_status = 'pending'"
                f"{active} GROUP BY being_id",
                [active_at] if active_at is not None else [],
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


def listed_notes_sql(
    notes: str,
    note_tags: str,
    being_id: UUID,
    *,
    kinds: Sequence[str] | None = None,
    scope: str | None = None,
    tags: Sequence[str] | None = None,
    read: bool | None = None,
    active_at: str | None = None,
    include_sensitive: bool = False,
    limit: int = 50,
) -> tuple[str, list[Any]]:
    """`engram notes list` on the tables `notes` and `note_tags`: newest first by `at` (then id).
    `active_at` (a `utc_text` instant) leaves out the notes superseded or expired by then; `tags`
    match any of them.

    The plan (`EXPLAIN QUERY PLAN` on SQLite, pinned by tests/integration/test_note_list.py): without
    tags, the `recent` or `kind_recent` index walks the being's notes newest first, so the limit stops
    the walk. With tags, each tag walks its own rows of `note_tags`' `(being_id, tag, at)` index newest
    first, joined to its notes and stopped by the limit, and the union of those few rows is ordered:
    the cost follows the notes listed, whether the tag is on one note or on most (an `id IN (…)` of
    the tag's note ids read every one of them: 184 ms for a tag on 90 % of 100k notes, against 0.1 ms).
    """
    where: list[str] = []
    params: list[Any] = []
    if kinds:
        where.append(f"n.kind IN ({', '.join('?' for _ in kinds)})")
        params += list(kinds)
    if scope is not None:
        where.append("n.scope = ?")
        params.append(scope)
    if read is not None:
        where.append("n.read = ?")
        params.append(read)
    if not include_sensitive:
        where.append("n.sensitivity = ?")
        params.append(Sensitivity.NORMAL.value)
    if active_at is not None:
        where.append(_active_note("n"))
        params.append(active_at)
    columns = ", ".join(f"n.{c}" for c in NOTES.columns)
    order = f"ORDER BY at DESC, id DESC LIMIT {int(limit)}"
    if not tags:
        conditions = " AND ".join(["n.being_id = ?", *where])
        return f"SELECT {columns} FROM {notes} n WHERE {conditions} {order}", [str(being_id), *params]
    conditions = " AND ".join(["t.being_id = ?", "t.tag = ?", *where])
    parts, all_params = [], []
    for i, tag in enumerate(tags):
        parts.append(
            f"SELECT * FROM (SELECT {columns} FROM {note_tags} t JOIN {notes} n ON n.id = t.note_id "
            f"WHERE {conditions} ORDER BY t.at DESC, t.note_id DESC LIMIT {int(limit)}) AS tag{i}"
        )
        all_params += [str(being_id), tag, *params]
    return " UNION ".join(parts) + f" {order}", all_params
