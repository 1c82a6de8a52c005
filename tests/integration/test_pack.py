"""The context pack (spec 002, ADR 0049), on SQLite and PostgreSQL: the most recent live notes, or
with a query the notes ranked by the hybrid search; never a sensitive, superseded or expired one;
a rebuild gives the same pack without calling the embedder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from uuid import UUID

import pytest

from engram.domain.errors import InvalidInput
from engram.domain.note import Note
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from tests.integration.test_rebuild_no_external_calls import CountingEmbedder
from tests.patrol_support import scene
from tests.support import SeededIds, SteppingClock

EVIDENCE = ["said so twice"]


@pytest.fixture
def counted(make_settings: Callable[..., Settings]) -> Iterator[tuple[Engram, CountingEmbedder]]:
    embedder = CountingEmbedder()
    e = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(), embedder=embedder)
    yield e, embedder
    e.close()


def _take(e: Engram, kind: str, text: str, **fields: object) -> str:
    if kind == "rule":
        fields.setdefault("evidence", EVIDENCE)
    return e.notes.take("Aria", NoteInput(kind=kind, text=text, **fields)).note_id  # type: ignore[arg-type]


def _supersede(e: Engram, old: str, new: str) -> None:
    a, b = e.store.get(Note, UUID(old)), e.store.get(Note, UUID(new))
    a.supersede(b, e.clock.now())
    e.store.save(a, b)


def _world(e: Engram) -> dict[str, str]:
    """A being with notes of every fate; returns their ids by name."""
    e.beings.register("Aria")
    week_ago = e.clock.now() - timedelta(days=7)
    ids = {
        "garage": _take(e, "knowledge", "The garage door code is 4321", at=week_ago),
        "expired": _take(e, "log", "Garage door left open overnight", ttl_days=1, at=week_ago),
        "secret": _take(e, "log", "The garage door safe holds the deeds", sensitivity="sensitive"),
        "old_rule": _take(e, "rule", "Close the garage door at night"),
        "rule": _take(e, "rule", "Close the garage door and lock it at night"),
        "disabled": _take(e, "log", "Garage door squeaks"),
        "scene": _take(e, "scene", scene("Painted the garage door", "2026-05-02")),
    }
    _supersede(e, ids["old_rule"], ids["rule"])
    e.notes.set_enabled("Aria", UUID(ids["disabled"]), False)
    for i in range(6):
        ids[f"chat{i}"] = _take(e, "log", f"Asked about the weather in Lisbon, day {i}")
    ids["summary"] = _take(e, "summary", "Planned the trip to Lisbon: flights booked, hotel next")
    return ids


def test_pack_holds_the_most_recent_live_notes_rendered_as_the_spec_says(engram: Engram) -> None:
    ids = _world(engram)
    pack = engram.packing.pack("Aria", limit=3)
    assert [n.id for n in pack.notes] == [ids["summary"], ids["chat5"], ids["chat4"]]
    assert pack.text == (
        "## Memory Context\n\n"
        "[summary] Planned the trip to Lisbon: flights booked, hotel next\n\n"
        "[log] Asked about the weather in Lisbon, day 5\n\n"
        "[log] Asked about the weather in Lisbon, day 4"
    )
    every = engram.packing.pack("Aria")
    shown = {n.id for n in every.notes}
    assert shown == {ids["garage"], ids["rule"], ids["summary"], *(ids[f"chat{i}"] for i in range(6))}
    assert every.notes[-1].id == ids["garage"]  # the oldest by `at`, though taken first
    for hidden in ("expired", "secret", "old_rule", "disabled", "scene"):
        assert ids[hidden] not in shown
    assert "deeds" not in every.text


def test_an_empty_pack_is_empty_text(engram: Engram) -> None:
    engram.beings.register("Aria")
    _take(engram, "log", "only a secret", sensitivity="sensitive")
    pack = engram.packing.pack("Aria")
    assert (pack.notes, pack.text) == ([], "")


def test_a_query_ranks_the_matching_note_first_though_it_is_older(engram: Engram) -> None:
    ids = _world(engram)
    pack = engram.packing.pack("Aria", query="garage door code", limit=5)
    assert pack.notes[0].id == ids["garage"]
    assert pack.notes[0].score is not None
    assert pack.text.startswith("## Memory Context\n\n[knowledge] The garage door code is 4321")
    found = {n.id for n in engram.packing.pack("Aria", query="garage door", limit=50).notes}
    assert ids["rule"] in found
    for hidden in ("expired", "secret", "old_rule", "disabled", "scene"):
        assert ids[hidden] not in found


def test_a_note_that_expires_or_is_superseded_leaves_the_searched_pack(engram: Engram) -> None:
    engram.beings.register("Aria")
    soon = _take(engram, "log", "The garage door code is 1111", ttl_days=1)
    kept = _take(engram, "log", "The garage door code is 2222")
    assert {n.id for n in engram.packing.pack("Aria", query="garage code").notes} == {soon, kept}
    engram.clock.current += timedelta(days=2)  # type: ignore[attr-defined]
    assert [n.id for n in engram.packing.pack("Aria", query="garage code").notes] == [kept]
    newer = _take(engram, "log", "The garage door code is 3333")
    _supersede(engram, kept, newer)
    assert [n.id for n in engram.packing.pack("Aria", query="garage code").notes] == [newer]


def test_a_rebuild_gives_the_same_pack_with_no_embedder_call(
    counted: tuple[Engram, CountingEmbedder],
) -> None:
    e, embedder = counted
    _world(e)
    before = e.packing.pack("Aria", query="garage door code", limit=5)
    assert embedder.texts > 1  # the notes were embedded, as `Note.Embedded` events
    e.views.ensure()
    embedder.reset()
    e.views.rebuild_all()
    assert embedder.calls == 0
    after = e.packing.pack("Aria", query="garage door code", limit=5)
    assert after == before
    assert (embedder.calls, embedder.texts) == (1, 1)  # the query alone: no note embedded again


@pytest.mark.parametrize(("limit", "query"), [(0, None), (201, None), (5, "   ")])
def test_bad_pack_requests_are_refused(engram: Engram, limit: int, query: str | None) -> None:
    engram.beings.register("Aria")
    with pytest.raises(InvalidInput):
        engram.packing.pack("Aria", query=query, limit=limit)


def test_the_worker_embeds_new_notes_so_that_a_query_embeds_only_its_text(
    make_settings: Callable[..., Settings],
) -> None:
    from engram.projections.notes import utc_text
    from engram.services.worker import Worker
    from tests.integration.http_support import wait_until

    embedder = CountingEmbedder()
    e = bootstrap(
        make_settings(note_embed_interval_s=0.05), clock=SteppingClock(), ids=SeededIds(), embedder=embedder
    )
    try:
        e.beings.register("Aria")
        e.beings.register("Bo")
        ids = [_take(e, "log", f"garage door code {i}") for i in range(3)]
        e.notes.take("Bo", NoteInput(kind="knowledge", text="Bo's bike is blue"))
        secret = _take(e, "knowledge", "the safe code", sensitivity="sensitive")
        worker = Worker(
            e.views,
            names=["notes", "note_search"],
            poll_interval=0.05,
            note_embedding=e.packing.embed_pending,
        )
        worker.start()
        try:
            assert wait_until(lambda: embedder.texts >= 4, timeout=30)
            now = utc_text(e.clock.now())
            assert wait_until(lambda: e.views.note_search.beings_unembedded(now) == [], timeout=30)
        finally:
            worker.stop()
        assert all(e.store.get(Note, UUID(i)).embedding is not None for i in ids)
        assert e.store.get(Note, UUID(secret)).embedding is None, "a sensitive note is never embedded"
        before = embedder.texts
        assert e.packing.pack("Aria", query="garage code").notes
        assert embedder.texts == before + 1, "the query embeds its own text, not the notes"
    finally:
        e.close()
