"""Reads behind the explorer's beings page and being overview (issue #14): counts of every being in one
grouped query per view, a being's nodes grouped for the decay histogram, its largest clusters, and
its patrol runs a page at a time. Every result is bounded whatever the being's size (ADR 0085)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.projections.memory import CLUSTERS
from engram.projections.patrol_runs import RUNS
from engram.projections.queries import ReadModels

Row = dict[str, Any]

COUNTS = ("notes", "alive", "dying", "dead", "clusters", "facts", "sessions")
"""What the beings page counts for each being."""

_STATE = {"active": "alive", "dying": "dying", "dead": "dead"}


class OverviewReads:
    def __init__(self, read: ReadModels) -> None:
        self.read = read

    def _grouped(self, view: str, table: str, key: str, where: str, params: list[Any]) -> dict[str, int]:
        with self.read.reading(view) as (conn, tables):
            rows = conn.query(
                f"SELECT {key} AS k, COUNT(*) AS n FROM {tables[table]} WHERE {where} GROUP BY {key}", params
            )
        return {str(r["k"]): int(r["n"]) for r in rows}

    def counts_by_being(
        self, being_id: UUID | None = None, statuses: Sequence[str] = ("active", "dying", "dead")
    ) -> dict[str, dict[str, int]]:
        """Every being's counts (`COUNTS`), by being id — or only `being_id`'s: one GROUP BY per
        table, never one query per being. `statuses`: the node statuses to count (the others stay 0)."""
        one = [str(being_id)] if being_id is not None else []
        marks = ", ".join("?" for _ in statuses)

        def scoped(column: str, where: str = "1 = 1") -> str:
            return f"{where} AND {column} = ?" if one else where

        out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
        for being, n in self._grouped("notes", "notes", "being_id", scoped("being_id"), one).items():
            out[being]["notes"] = n
        with self.read.reading("memory") as (conn, tables):
            rows = conn.query(
                f"SELECT being_id, status, COUNT(*) AS n FROM {tables['nodes']} "
                f"WHERE {scoped('being_id', f'status IN ({marks})')} GROUP BY being_id, status",
                [*statuses, *one],
            )
        for r in rows:
            out[str(r["being_id"])][_STATE.get(str(r["status"]), str(r["status"]))] = int(r["n"])
        # Topics only: every being has its two roots.
        topics = self._grouped(
            "memory", "clusters", "being_id", scoped("being_id", "is_root = ?"), [False, *one]
        )
        for being, n in topics.items():
            out[being]["clusters"] = n
        active = scoped("owner_id", "owner_kind = 'being' AND status = 'active'")
        for being, n in self._grouped("facts", "facts", "owner_id", active, one).items():
            out[being]["facts"] = n
        for being, n in self._grouped(
            "conversations", "sessions", "being_id", scoped("being_id"), one
        ).items():
            out[being]["sessions"] = n
        return dict(out)

    def counts_for(
        self, being_id: UUID, statuses: Sequence[str] = ("active", "dying", "dead")
    ) -> dict[str, int]:
        return self.counts_by_being(being_id, statuses).get(str(being_id), dict.fromkeys(COUNTS, 0))

    def decay_groups(self, being_id: UUID) -> list[Row]:
        """The being's alive and dying nodes that decay, counted by status and `dying_cycle` (the
        cycle their effective importance reaches 0.05, which fixes it to within a cycle's decay):
        an index-only scan of the memory view's `decay` index, however many nodes (ADR 0085)."""
        with self.read.reading("memory") as (conn, tables):
            rows = conn.query(
                f"SELECT status, dying_cycle, COUNT(*) AS n FROM {tables['nodes']} "
                "WHERE being_id = ? AND status IN ('active', 'dying') AND pinned = ? "
                "GROUP BY status, dying_cycle",
                [str(being_id), False],
            )
        return [
            {"status": str(r["status"]), "dying_cycle": int(r["dying_cycle"]), "n": int(r["n"])} for r in rows
        ]

    def pinned_groups(self, being_id: UUID) -> list[Row]:
        """The being's pinned nodes (they never decay) by importance to the hundredth (`pct`)."""
        with self.read.reading("memory") as (conn, tables):
            # `+ 0.5` then a cast rounds on SQLite, whose cast truncates; PostgreSQL's cast rounds.
            plus = " + 0.5" if self.read.dbs["memory"].dialect == "sqlite" else ""
            pct = f"CAST(importance * 100{plus} AS INTEGER)"
            rows = conn.query(
                f"SELECT status, {pct} AS pct, COUNT(*) AS n FROM {tables['nodes']} "
                f"WHERE being_id = ? AND status IN ('active', 'dying') AND pinned = ? GROUP BY status, {pct}",
                [str(being_id), True],
            )
        return [{"status": str(r["status"]), "pct": int(r["pct"] or 0), "n": int(r["n"])} for r in rows]

    def largest_clusters(self, being_id: UUID, limit: int) -> list[Row]:
        """The being's roots and its `limit` largest topics (by nodes, dead included)."""
        roots = self.read._select("memory", CLUSTERS, "being_id = ? AND is_root = ?", [str(being_id), True])
        topics = self.read._select(
            "memory",
            CLUSTERS,
            "being_id = ? AND is_root = ?",
            [str(being_id), False],
            f"ORDER BY total_count DESC, id LIMIT {int(limit)}",
        )
        return roots + topics

    def patrol_runs(self, being_id: UUID, *, before: int | None = None, limit: int = 10) -> list[Row]:
        """The being's patrol runs, the latest first, those of cycles before `before` when given."""
        where = "being_id = ?"
        params: list[Any] = [str(being_id)]
        if before is not None:
            where += " AND cycle < ?"
            params.append(int(before))
        rows = self.read._select(
            "patrol_runs", RUNS, where, params, f"ORDER BY cycle DESC LIMIT {int(limit)}"
        )
        for r in rows:
            r["steps"] = json.loads(r.pop("steps_json"))
        return rows
