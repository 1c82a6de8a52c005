"""Forgetting an item or a subject purges the views in place (ADR 0089), on both backends: the views
are then as a full rebuild makes them, and nothing was rebuilt."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from engram.services.bootstrap import Engram
from engram.services.commands import MessageInput, NoteInput
from tests.integration.test_erasure_items import CANARY, T0, USER_CANARY, _plant
from tests.integration.test_erasure_purge import _snapshot
from tests.patrol_support import scene


def _plant_more(engram: Engram) -> dict[str, str]:
    ids = _plant(engram)
    for i, place in enumerate(["garden", "harbour", "station"]):
        engram.notes.take("Aria", NoteInput(text=scene(f"Met Lena at the {place}", actors=["me", "Lena"])))
        engram.messages.take(
            "Aria", MessageInput(id=f"o{i}", user="olaf", text=f"olaf at the {place}", at=T0)
        )
    engram.messages.take("Aria", MessageInput(id="m4", user="mina", text="mina again", at=T0))
    engram.patrol("Aria")
    engram.views.catch_up_or_rebuild()
    return ids


def _forget(engram: Engram, what: str, ids: dict[str, str]) -> dict[str, int]:
    if what == "subject":
        return engram.item_forgetting.forget_subject("Aria", "mina", by="admin").counts
    return engram.item_forgetting.forget_item(what, ids[what], by="admin").counts


def _quoting(snapshot: dict[str, list[dict[str, Any]]], needle: str) -> list[str]:
    return [t for t, rows in snapshot.items() for r in rows if any(needle in str(v) for v in r.values())]


def _centroid_points(engram: Engram, snapshot: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Each centroid's point in the index (its mean), rounded to float32's precision."""
    vectors, out = engram.views.vectors, {}
    for row in snapshot["centroids"]:
        mean = vectors.centroid(UUID(row["being_id"]), row["model"], UUID(row["cluster_id"]))
        out[row["id"]] = [] if mean is None else [round(float(x), 5) for x in mean]
    return out


@pytest.mark.parametrize("what", ["note", "message", "fact", "subject"])
def test_purging_an_item_leaves_the_views_as_a_full_rebuild_would(engram: Engram, what: str) -> None:
    ids = _plant_more(engram)
    counts = _forget(engram, what, ids)
    # deleted in place; the messages' BM25 view is rebuilt when a message went (ADR 0089), and a
    # forgotten message's conversation view (its last user message, its summaries: ADR 0093)
    rebuilt = {"note": 0, "fact": 0, "subject": 1, "message": 2}[what]
    assert counts["views_rebuilt"] == rebuilt and counts["view_rows"] > 0
    engram.views.catch_up_or_rebuild()
    purged = _snapshot(engram)
    positions = engram.views.positions()
    if what == "note":
        # A sub-cluster's name may be made of its members' words: the being's own text, under its
        # key (ADR 0076), in a rebuild as here.
        assert set(_quoting(purged, CANARY)) <= {"clusters"}
    if what in ("fact", "subject"):
        assert "Mina hides" not in str(purged["facts"])
    if what == "subject":
        assert _quoting(purged, USER_CANARY) == [] and "mina again" not in str(purged)
    means = _centroid_points(engram, purged)
    engram.views.rebuild_all()
    rebuilt = _snapshot(engram)
    assert _centroid_points(engram, rebuilt) == means  # the centroids' points were written again
    for snapshot in (purged, rebuilt):  # when a centroid last moved is not a count (ADR 0089)
        for row in snapshot["centroids"]:
            row.pop("position")
    assert engram.views.positions() == positions
    assert [t for t in rebuilt if purged[t] != rebuilt[t]] == []  # table by table, row by row
