"""`engram notes list` through the Python API (`engram.listing.notes`) on both backends: newest first,
tags matching any, expired (by the clock, before the worker records it), superseded and sensitive
notes left out unless asked, and the query plan on SQLite."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.domain.errors import InvalidInput
from engram.projections.notes import NOTE_TAGS, NOTES
from engram.projections.queries import listed_notes_sql
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from tests.support import SteppingClock


def _take(engram: Engram, being: str, kind: str, text: str, **fields: Any) -> str:
    return engram.notes.take(being, NoteInput(kind=kind, text=text, **fields)).note_id


@pytest.fixture
def aria(engram: Engram, clock: SteppingClock) -> dict[str, str]:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    ids = {
        "expired_log": _take(
            engram,
            "Aria",
            "log",
            "ran the nightly job",
            stability="volatile",
            ttl_days=1,
            at=clock.current - timedelta(days=3),
        ),
        "todo": _take(engram, "Aria", "todo", "Call Mina", tags=["errand"]),
        "secret": _take(engram, "Aria", "knowledge", "The door code is 4711", sensitivity="sensitive"),
        "old_soul": _take(engram, "Aria", "soul", "Calm."),
        "soul": _take(engram, "Aria", "soul", "Calm and brief."),
        "project": _take(
            engram, "Aria", "knowledge", "Beds face south", scope="project-x", tags=["garden", "x"]
        ),
        "rule": _take(
            engram, "Aria", "rule", "Water in the morning", evidence=["wilted at noon"], tags=[" garden "]
        ),
    }
    _take(engram, "Bo", "todo", "Bo's errand", tags=["errand"])
    return ids


def _ids(notes: list[Any]) -> list[str]:
    return [n.id for n in notes]


def test_active_notes_newest_first_without_sensitive_ones(engram: Engram, aria: dict[str, str]) -> None:
    listed = engram.listing.notes("Aria")
    assert _ids(listed) == [aria["rule"], aria["project"], aria["soul"], aria["todo"]]
    assert {n.state for n in listed} == {"active"}
    assert listed[0].tags == ["garden"] and listed[0].evidence == ["wilted at noon"]
    assert listed[1].scope == "project-x" and listed[3].scope == "user"
    assert _ids(engram.listing.notes("Aria", limit=2)) == [aria["rule"], aria["project"]]


def test_filters_kind_scope_and_tags_match_any(engram: Engram, aria: dict[str, str]) -> None:
    listing = engram.listing
    assert _ids(listing.notes("Aria", kinds=["knowledge"])) == [aria["project"]]
    assert _ids(listing.notes("Aria", kinds=["knowledge", "todo"])) == [aria["project"], aria["todo"]]
    assert _ids(listing.notes("Aria", scope="project-x")) == [aria["project"]]
    assert _ids(listing.notes("Aria", tags=["garden", "errand"])) == [
        aria["rule"],
        aria["project"],
        aria["todo"],
    ]
    assert _ids(listing.notes("Aria", tags=["x"])) == [aria["project"]]
    # A note with two of the tags comes once; the tags' rows are merged newest first, then limited.
    assert _ids(listing.notes("Aria", tags=["garden", "x"])) == [aria["rule"], aria["project"]]
    assert _ids(listing.notes("Aria", tags=["errand", "x", "garden"], limit=2)) == [
        aria["rule"],
        aria["project"],
    ]
    assert _ids(listing.notes("Aria", tags=[" x "], kinds=["rule"])) == []
    assert listing.notes("Aria", tags=["nothing"]) == []
    assert [n.text for n in listing.notes("Bo", tags=["errand"])] == ["Bo's errand"]  # one being's
    # The read/unread filter of the older list stays.
    assert _ids(listing.notes("Aria", kinds=["todo"], unread=True)) == [aria["todo"]]
    engram.notes.mark_read("Aria", UUID(aria["todo"]))
    assert listing.notes("Aria", kinds=["todo"], unread=True) == []
    assert _ids(listing.notes("Aria", kinds=["todo"], unread=False)) == [aria["todo"]]


def test_all_shows_every_state_and_sensitive_only_when_asked(engram: Engram, aria: dict[str, str]) -> None:
    listed = {n.id: n for n in engram.listing.notes("Aria", include_inactive=True)}
    assert set(listed) == set(aria.values()) - {aria["secret"]}
    assert listed[aria["old_soul"]].state == "superseded"
    assert listed[aria["old_soul"]].superseded_by == aria["soul"]
    assert listed[aria["old_soul"]].superseded_reason == "soul"
    assert listed[aria["expired_log"]].state == "expired"
    assert _ids(engram.listing.notes("Aria", include_inactive=True))[-1] == aria["expired_log"]  # oldest `at`
    sensitive = engram.listing.notes("Aria", kinds=["knowledge"], include_sensitive=True)
    assert _ids(sensitive) == [aria["project"], aria["secret"]]
    assert sensitive[1].sensitivity == "sensitive"


def test_a_note_leaves_the_list_when_it_expires_before_the_worker_records_it(
    engram: Engram, clock: SteppingClock
) -> None:
    engram.beings.register("Aria")
    note = _take(engram, "Aria", "reminder", "Bins out", stability="volatile", ttl_days=1)
    assert _ids(engram.listing.notes("Aria")) == [note]
    clock.current += timedelta(days=1)
    assert engram.listing.notes("Aria") == []
    [expired] = engram.listing.notes("Aria", include_inactive=True)
    assert expired.id == note and expired.state == "expired"


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"tags": [f"t{i}" for i in range(33)]}, "tag"),
        ({"tags": ["  "]}, "tag"),
        ({"kinds": ["poem"]}, "kind"),
        ({"scope": "s" * 201}, "scope"),
    ],
)
def test_bad_filters_are_refused_naming_the_field(
    engram: Engram, filters: dict[str, Any], field: str
) -> None:
    engram.beings.register("Aria")
    with pytest.raises(InvalidInput) as refused:
        engram.listing.notes("Aria", **filters)
    assert refused.value.details.get("field") == field


def test_the_list_walks_the_indexes(sqlite_engram: Engram) -> None:
    """SQLite's plan: newest first from `recent`/`kind_recent` (no sort of the being's notes), and a
    tag filter through `note_tags`' `tag` index."""
    engram = sqlite_engram
    engram.beings.register("Aria")
    being_id = UUID(engram.notes.take("Aria", NoteInput(kind="todo", text="x", tags=["a"])).being_id)
    engram.views.ensure(names=["notes"])

    def plan(**filters: Any) -> str:
        with engram.views.read.reading("notes") as (conn, tables):
            sql, params = listed_notes_sql(
                tables[NOTES.name], tables[NOTE_TAGS.name], being_id, active_at="2026", **filters
            )
            rows = conn.query(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(r["detail"]) for r in rows)

    plain = plan()
    assert "_recent" in plain and "TEMP B-TREE FOR ORDER BY" not in plain, plain
    by_kind = plan(kinds=["todo"])
    assert "_kind_recent" in by_kind and "TEMP B-TREE FOR ORDER BY" not in by_kind, by_kind
    tagged = plan(tags=["a", "b"])
    assert "_tag" in tagged, tagged
