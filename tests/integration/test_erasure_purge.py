"""The targeted purge of an erasure (ADR 0077), on both backends with Qdrant Edge: it leaves the
views as a full rebuild would, without the being's rows, full-text entries or vectors."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.adapters.views.table_scrub import NoTableScrub
from engram.domain.ids import being_id_for_name
from engram.projections import being_rows, engine
from engram.projections.engine import Projection
from engram.projections.tables import TableSpec
from engram.services.bootstrap import Engram
from engram.services.commands import FactInput, MessageInput, NoteInput
from engram.services.erasure_purge import ViewPurge
from engram.services.tokens import TokenService
from tests.integration.test_erasure import CANARY, T0, _plant
from tests.patrol_support import scene


def _plant_more(engram: Engram) -> None:
    _plant(engram)  # Aria: notes, a message, think_md, a node with its vector; Bo: a note
    engram.notes.take("Bo", NoteInput(text=scene("Fed the cat by the window", actors=["me", "Tom"])))
    engram.messages.take("Bo", MessageInput(id="b1", user="tom", text="the cat is fed", at=T0))
    engram.facts.state("Aria", FactInput(text=f"Mina keeps a {CANARY}", subject="mina"))
    engram.facts.state("Bo", FactInput(text="Tom likes cats", subject="tom"))
    tokens = TokenService(engram)
    tokens.issue(being="Aria", label="aria's")
    tokens.issue(being="Bo", label="bo's")
    engram.patrol("Bo")
    engram.views.catch_up_or_rebuild()


def _snapshot(engram: Engram) -> dict[str, list[dict[str, Any]]]:
    """Every row of every view's active generation, by table, in key order."""
    views = engram.views
    out: dict[str, list[dict[str, Any]]] = {}
    for name in views.names():
        db, projection = views.dbs[name], views.projections[name]
        with db.read() as conn:
            tables = engine.read_tables(conn, db, projection)
            for spec in projection.tables:
                rows = conn.query(f"SELECT * FROM {tables[spec.name]} ORDER BY {spec.key}")
                out[spec.name] = [{k: v for k, v in r.items() if k != "tsv"} for r in rows]
    return out


def _rows_of(snapshot: dict[str, list[dict[str, Any]]], being: UUID) -> dict[str, int]:
    found = {}
    for table, rows in snapshot.items():
        column = being_rows.BEING_COLUMNS[table]
        n = sum(1 for r in rows if column is not None and str(r[column]) == str(being))
        n += sum(1 for r in rows if any(CANARY in str(v) for v in r.values()))
        if n:
            found[table] = n
    return found


def _points(engram: Engram, being: UUID) -> dict[str, int]:
    index = engram.views.vectors_view.index
    return {c: index.count(c, being) for c in sorted(index.list_collections())}


def test_every_view_table_is_placed_for_the_purge(engram: Engram) -> None:
    tables = {spec.name for p in engram.views.projections.values() for spec in p.tables}
    assert tables == set(being_rows.BEING_COLUMNS)
    assert all(being_rows.covered(p) for p in engram.views.projections.values())


def test_the_purge_leaves_the_views_as_a_full_rebuild_would(engram: Engram) -> None:
    _plant_more(engram)
    aria, bo = being_id_for_name("Aria"), being_id_for_name("Bo")
    before = _snapshot(engram)
    assert {"beings", "nodes", "notes", "messages", "facts", "tokens"} <= set(_rows_of(before, aria))
    assert any(_points(engram, aria).values()), "Aria has vectors before the erasure"
    bo_points = _points(engram, bo)
    assert any(bo_points.values())

    done = engram.forgetting.forget_being("Aria", by="admin")
    assert done.counts["views_rebuilt"] == 0  # nothing rebuilt: the rows were deleted in place
    assert done.counts["view_rows"] > 0 and done.counts["vector_points"] > 0
    engram.views.catch_up_or_rebuild()
    purged = _snapshot(engram)
    assert _rows_of(purged, aria) == {}
    assert not any(_points(engram, aria).values())
    assert "feed the cat" in {n.text for n in engram.listing.notes("Bo")}  # the other being reads on
    positions = engram.views.positions()

    engram.views.rebuild_all()
    rebuilt = _snapshot(engram)
    assert engram.views.positions() == positions  # the purge kept the tracking where a rebuild puts it
    assert rebuilt == purged  # table by table, row by row: the other beings' rows are as a rebuild makes them
    assert sum(_points(engram, bo).values()) == sum(bo_points.values())


def test_purge_items_deletes_the_rows_and_points_of_those_aggregates_only(engram: Engram) -> None:
    _plant_more(engram)
    bo = being_id_for_name("Bo")
    before = _snapshot(engram)
    node = next(r for r in before["nodes"] if r["being_id"] == str(bo))
    fact = next(r for r in before["facts"] if r["owner_id"] == str(bo))
    purge = engram.forgetting.purge
    assert purge is not None
    report = purge.purge_items(bo, [UUID(node["id"]), UUID(fact["id"])])
    assert report.rows["memory"] == {"nodes": 1}
    assert report.rows["facts"]["facts"] == 1
    assert report.point_count >= 1  # the node's vector (and the fact's, when embedded)
    after = _snapshot(engram)
    assert [r["id"] for r in after["nodes"] if r["id"] == node["id"]] == []
    assert [r["id"] for r in after["facts"] if r["id"] == fact["id"]] == []
    assert len([r for r in after["notes"] if r["being_id"] == str(bo)]) == len(
        [r for r in before["notes"] if r["being_id"] == str(bo)]
    )  # the being's other rows stay
    index = engram.views.vectors_view.index
    nodes_collections = [c for c in index.list_collections() if c.startswith("engram_nodes__")]
    assert nodes_collections and all(
        index.retrieve(c, bo, [UUID(node["id"])]) == [] for c in nodes_collections
    )


class _Unplaced(Projection):
    """A view whose table `being_rows` does not place: the purge cannot know its being column."""

    name = "unplaced"
    tables = (TableSpec(name="unplaced_rows", columns={"id": "id", "being_id": "id"}),)


def test_a_view_with_a_table_the_purge_does_not_place_is_rebuilt_instead(engram: Engram) -> None:
    engram.beings.register("Aria")
    views = engram.open_views(extra=[_Unplaced()])
    try:
        views.ensure()
        report = ViewPurge(lambda: views, NoTableScrub()).purge_being(being_id_for_name("Aria"))
    finally:
        views.close()
    assert report.rebuilt == ["unplaced"]
    assert report.rows["beings"] == {"beings": 1}  # the placed views are purged in place
