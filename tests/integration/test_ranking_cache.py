"""The ranking cache (ADR 0015): `query`'s in-memory copy of each being's ranking columns is, after any
sequence of writes, exactly what the memory view holds, on both backends."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from engram.domain.node import ReactivationSource
from engram.projections.queries import ReadModels
from engram.projections.ranking_cache import BeingRanking, RankingCache
from engram.services.bootstrap import Engram
from engram.services.reading import Reading
from tests.integration.test_reading import CLIMBED, FAUCET, SCENES, prepare, set_status
from tests.patrol_support import note_scenes, scene

STATUSES = ("active", "dying", "dead")


def reference(engram: Engram, being_id: UUID) -> dict[str, dict[str, Any]]:
    """The ranking rows as the view holds them, read row by row with `nodes`."""
    engram.views.ensure()
    read = engram.views.read
    with read.snapshot("memory"), read.reading("memory") as (conn, tables):
        raw = {
            str(r["id"]): r
            for r in conn.query(
                f"SELECT id, when_json FROM {tables['nodes']} WHERE being_id = ?", [str(being_id)]
            )
        }
        nodes = read.nodes(being_id)
    out = {}
    for r in nodes:
        out[r["id"]] = {
            "id": r["id"],
            "seq": r["seq"],
            "status": r["status"],
            "importance": r["importance"],
            "activated": dt.datetime.fromisoformat(r["last_activated_at"]).timestamp(),
            "when_json": raw[r["id"]]["when_json"],
            "_asks": "?" in (r["action"] or ""),
        }
    return out


def cached(engram: Engram, being_id: UUID, ids: Any) -> dict[str, dict[str, Any]]:
    rows = engram.views.read.ranking(being_id).rows(ids)
    for row in rows.values():
        row.pop("_day", None)  # derived from when_json; checked below where it is set
    return rows


def test_the_copy_follows_every_change_of_the_view(engram: Engram) -> None:
    being_id, nodes = prepare(engram)
    ids = list(nodes.values())
    assert cached(engram, being_id, ids) == reference(engram, being_id)  # read whole

    Reading(engram).query("Aria", "garden tomatoes", 3)  # reactivates: importance, activation
    engram.views.ensure()
    assert cached(engram, being_id, ids) == reference(engram, being_id)

    set_status(engram, being_id, nodes[FAUCET], "dying")
    set_status(engram, being_id, nodes[CLIMBED], "dead")
    engram.views.ensure()
    assert cached(engram, being_id, ids) == reference(engram, being_id)

    note_scenes(engram, "Aria", [scene("Did they water the basil?", "2026-07-23", feeling="unsure")])
    engram.patrol("Aria")
    engram.views.ensure()
    expected = reference(engram, being_id)
    assert len(expected) == len(ids) + 1
    assert cached(engram, being_id, list(expected)) == expected
    assert [r for r in expected.values() if r["_asks"]], "the new question is seen as one"
    # Built from nothing, the copy is the same as the one kept current.
    fresh = ReadModels(engram.views.dbs, engram.views.projections, RankingCache())
    assert fresh.ranking(being_id).rows(list(expected)) == engram.views.read.ranking(being_id).rows(
        list(expected)
    )


def test_a_plain_date_is_the_day_and_other_whens_keep_their_json(engram: Engram) -> None:
    being_id, nodes = prepare(engram)
    rows = engram.views.read.ranking(being_id).rows(nodes.values())
    planted = rows[nodes["Planted tomatoes in the garden with Mina"]]
    assert planted["_day"] == "2026-05-02" and planted["when_json"] == '["2026-05-02"]'
    marathon = rows[nodes["Ran the half marathon with Lena"]]
    assert "_day" not in marathon and "Day7" in marathon["when_json"]


def test_neighbours_are_the_nearest_noted_among_the_statuses(engram: Engram) -> None:
    being_id, nodes = prepare(engram)
    set_status(engram, being_id, nodes[FAUCET], "dead")
    engram.views.ensure()
    in_order = sorted(reference(engram, being_id).values(), key=lambda r: r["seq"])
    ranking = engram.views.read.ranking(being_id)
    for statuses in (("active", "dying"), STATUSES):
        kept = [r["id"] for r in in_order if r["status"] in statuses]
        for seed in in_order:
            if seed["id"] not in kept:
                continue
            at = kept.index(seed["id"])
            for radius in (1, 2):
                expected = set(kept[max(0, at - radius) : at] + kept[at + 1 : at + 1 + radius])
                assert set(ranking.around([seed["id"]], radius, statuses)) == expected


def test_the_copy_is_scoped_to_one_being(engram: Engram) -> None:
    aria, aria_nodes = prepare(engram)
    bob, bob_nodes = prepare(engram, "Bob")
    read = engram.views.read
    assert read.ranking(aria).rows(bob_nodes.values()) == {}
    assert read.ranking(bob).around(list(aria_nodes.values()), 2, STATUSES) == {}
    assert set(read.ranking(bob).rows(bob_nodes.values())) == set(bob_nodes.values())


def test_the_least_recently_read_being_is_dropped_beyond_the_bound(engram: Engram) -> None:
    aria, aria_nodes = prepare(engram)
    bob, _ = prepare(engram, "Bob")
    cache = RankingCache(max_nodes=len(SCENES))
    read = ReadModels(engram.views.dbs, engram.views.projections, cache)
    first = read.ranking(aria)
    read.ranking(bob)  # over the bound: Aria's copy goes
    again = read.ranking(aria)
    assert again is not first
    assert again.rows(aria_nodes.values()) == first.rows(aria_nodes.values())


def test_one_beings_copy_in_the_making_holds_up_no_other_being(engram: Engram) -> None:
    import threading

    aria, _ = prepare(engram)
    bob, bob_nodes = prepare(engram, "Bob")
    cache = RankingCache()
    read = ReadModels(engram.views.dbs, engram.views.projections, cache)
    got: list[BeingRanking] = []
    with cache._lock_for(str(aria)):  # as while Aria's copy is read whole
        other = threading.Thread(target=lambda: got.append(read.ranking(bob)))
        other.start()
        other.join(timeout=30)
        assert not other.is_alive()
    assert set(got[0].rows(bob_nodes.values())) == set(bob_nodes.values())


def test_a_rebuilt_view_is_read_again(engram: Engram) -> None:
    being_id, nodes = prepare(engram)
    before = engram.views.read.ranking(being_id)
    engram.views.rebuild("memory")
    after = engram.views.read.ranking(being_id)
    assert after is not before and after.table != before.table
    assert after.rows(nodes.values()) == before.rows(nodes.values())


def test_a_new_node_out_of_seq_order_makes_the_copy_read_again() -> None:
    ranking = BeingRanking("nodes_g1", 0, list(STATUSES))
    row = {"importance": 0.5, "last_activated_at": None, "when_json": "[]", "asks": 0, "status": "active"}
    assert ranking.apply([{**row, "id": "a", "seq": 5}, {**row, "id": "b", "seq": 9}])
    assert ranking.apply([{**row, "id": "a", "seq": 5, "status": "dead"}])  # a change, not a new node
    assert ranking.rows(["a"])["a"]["status"] == "dead"
    assert not ranking.apply([{**row, "id": "c", "seq": 7}])


def test_changes_are_read_through_the_being_position_index_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.adapters.views import sqlite_db
    from engram.services.bootstrap import bootstrap
    from engram.services.config import Settings

    with bootstrap(Settings(data_dir=tmp_path / "d", embedder="hashing", llm="none")) as e:
        being_id, nodes = prepare(e)
        e.views.read.ranking(being_id)
        reading = Reading(e)
        reading.reactivate(being_id, [nodes[FAUCET]], ReactivationSource.QUERY)
        e.views.ensure()
        statements: list[tuple[str, list[Any]]] = []
        original = sqlite_db._Conn.query

        def spy(self: Any, sql: str, params: Any = ()) -> list[dict[str, Any]]:
            statements.append((sql, list(params)))
            return original(self, sql, params)

        monkeypatch.setattr(sqlite_db._Conn, "query", spy)
        rows = e.views.read.ranking(being_id).rows([nodes[FAUCET]])
        monkeypatch.undo()
        assert rows[nodes[FAUCET]]["importance"] == node_importance(e, being_id, nodes[FAUCET])
        [(sql, params)] = [(s, p) for s, p in statements if "position > ?" in s]
        with sqlite3.connect(e.settings.data_dir / "views" / "memory.sqlite3") as conn:
            plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert "changes" in plan and "position>?" in plan, plan


def node_importance(engram: Engram, being_id: UUID, node_id: str) -> float:
    row = engram.views.read.node(being_id, UUID(node_id))
    assert row is not None
    return float(row["importance"])
