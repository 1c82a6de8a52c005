"""Forgetting an item or a subject purges the views in place (ADR 0089), on both backends: the views
are then as a full rebuild makes them, and nothing was rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest

from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput, NoteInput
from engram.services.config import Settings
from tests.integration.test_erasure import _files_with, _pg_dump
from tests.integration.test_erasure_items import CANARY, T0, USER_CANARY, _plant
from tests.integration.test_erasure_purge import _snapshot
from tests.patrol_support import scene
from tests.support import SeededIds, SteppingClock


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
    """The tables with a row quoting `needle` (in any case: a name may be capitalised)."""
    needle = needle.lower()
    return [
        t for t, rows in snapshot.items() for r in rows if any(needle in str(v).lower() for v in r.values())
    ]


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
    # deleted in place; only the messages' BM25 view is rebuilt when a message went (ADR 0089); a
    # forgotten message's conversation is recomputed in place (ADR 0093)
    assert counts["views_rebuilt"] == (0 if what in ("note", "fact") else 1) and counts["view_rows"] > 0
    engram.views.catch_up_or_rebuild()
    purged = _snapshot(engram)
    positions = engram.views.positions()
    if what == "note":
        # A sub-cluster's fallback name quotes no member any more (ADR 0093): nothing of it is left.
        assert _quoting(purged, CANARY) == []
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


FIRST_WORDS_CANARY = "wqzfirstwordscanaryx"


def test_a_sub_cluster_named_without_an_llm_keeps_no_word_of_a_forgotten_note(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    """ADR 0093: the canary is the first words of the earliest member of a sub-cluster born without an
    LLM (the fallback name was those words); after `forget note` it is in no view, file or dump."""
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        engram.beings.register("Aria")
        texts = [
            f"{FIRST_WORDS_CANARY} walked with Lena at the lake",
            *[f"Walked with Lena at the {p}" for p in ("lake shore", "lake path", "lake pier")],
        ]
        ids = [
            engram.notes.take("Aria", NoteInput(text=scene(t, actors=["me", "Lena"]))).note_id for t in texts
        ]
        engram.patrol("Aria")
        engram.views.catch_up_or_rebuild()
        being_id = engram.forgetting._being_id("Aria")
        subs = [c for c in engram.views.read.clusters(being_id) if not c["is_root"]]
        node = next(n for n in engram.listing.nodes("Aria") if FIRST_WORDS_CANARY in n.action)
        assert any(str(c["id"]) == str(node.cluster_id) for c in subs), (
            "the canary's node is in a sub-cluster"
        )
        assert FIRST_WORDS_CANARY not in str(subs).lower()  # the name quotes no member
        engram.item_forgetting.forget_item("note", ids[0], by="admin")
        engram.views.catch_up_or_rebuild()
        assert _quoting(_snapshot(engram), FIRST_WORDS_CANARY) == []
    finally:
        engram.close()
    assert _files_with(settings.data_dir, FIRST_WORDS_CANARY.encode()) == []
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump and FIRST_WORDS_CANARY.encode() not in dump.lower()
