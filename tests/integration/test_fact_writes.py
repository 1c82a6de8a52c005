"""Writing facts on both backends (issue #11, ADR 0056/0057): keyed upsert with history, eight
writers of one hot key, spaces and their members, entity merges, capacity archiving, lore, the
import's idempotent re-runs, and the shared bad inputs refused naming the field, nothing written."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from engram.domain.errors import DomainError, InvalidInput, InvalidTransition
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings
from engram.services.errors import NotFound
from engram.services.fact_capacity import ACTIVE_FACTS_PER_SUBJECT, ACTIVE_LORE_LINES
from engram.services.fact_import import import_facts
from tests.fact_cases import BAD_SPACES, GOOD, bad_facts
from tests.support import SeededIds, SteppingClock

KEY = "profile|person|mina|fact"


def _events(engram: Engram) -> int:
    return len(engram.audit.log(limit=10_000))


def _fact(**fields: Any) -> FactInput:
    return FactInput.model_validate({**GOOD, **fields})


def _beings(engram: Engram, *names: str) -> list[UUID]:
    return [UUID(engram.beings.register(n).being_id) for n in names]


def test_keyed_upsert_keeps_one_fact_with_its_history(engram: Engram) -> None:
    (aria,) = _beings(engram, "Aria")
    first = engram.facts.state("Aria", _fact(memory_key=KEY))
    again = engram.facts.state("Aria", _fact(memory_key=KEY))
    moved = engram.facts.state("Aria", _fact(memory_key=KEY, text="Mina lives in Denver"))
    assert [w.outcome for w in (first, again, moved)] == ["stated", "reinforced", "revised"]
    assert first.fact_id == again.fact_id == moved.fact_id and moved.version == 3
    assert (again.importance, moved.importance) == (2, 1)
    engram.views.ensure()
    rows = engram.views.facts.facts(engram.views.facts.owners(aria), include_archived=True)
    assert [(r["text"], r["version"]) for r in rows] == [("Mina lives in Denver", 3)]
    history = engram.audit.history("fact", first.fact_id)
    assert [h["type"] for h in history] == ["Fact.Stated", "Fact.Reinforced", "Fact.Revised"]
    then = datetime.fromisoformat(history[1]["timestamp"])
    assert engram.audit.state("fact", first.fact_id, as_of=then)["text"] == "Mina lives in Austin"
    assert engram.audit.state("fact", first.fact_id)["text"] == "Mina lives in Denver"


def test_eight_writers_of_one_hot_key_land_as_eight_versions(
    make_settings: Callable[..., Settings],
) -> None:
    engrams = [bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(i)) for i in range(8)]
    try:
        engrams[0].beings.register("Aria")
        barrier = threading.Barrier(8, timeout=60)
        results: list[Any] = [None] * 8

        def write(i: int) -> None:
            barrier.wait()
            try:
                results[i] = engrams[i].facts.state("Aria", _fact(memory_key=KEY, text=f"Mina's desk is {i}"))
            except Exception as exc:  # handed back to the assertion below
                results[i] = exc

        threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sorted(r.version for r in results) == list(range(1, 9))
        assert len({r.fact_id for r in results}) == 1
        history = engrams[0].audit.history("fact", results[0].fact_id)
        assert len(history) == 8  # none lost
    finally:
        for e in engrams:
            e.close()


def test_space_facts_are_read_and_changed_by_members_only(engram: Engram) -> None:
    aria, bea, cal = _beings(engram, "Aria", "Bea", "Cal")
    engram.spaces.create("family", ["Aria", "Bea"])
    shared = engram.facts.state("Aria", _fact(), space="family")
    own = engram.facts.state("Cal", _fact(text="Cal keeps bees"))
    assert (shared.owner, shared.owner_kind) == ("family", "space")
    with pytest.raises(InvalidInput) as err:
        engram.facts.state("Cal", _fact(), space="family")
    assert err.value.details["field"] == "space"
    with pytest.raises(InvalidInput):
        engram.facts.state("Cal", _fact(), space="nowhere")
    for change in (engram.facts.pin, engram.facts.archive):
        with pytest.raises(NotFound):
            change("Cal", UUID(shared.fact_id))
        with pytest.raises(NotFound):
            change("Aria", UUID(own.fact_id))
    engram.facts.pin("Bea", UUID(shared.fact_id))
    engram.views.ensure()
    reads = engram.views.facts
    seen = {b: {r["id"] for r in reads.facts(reads.owners(b))} for b in (aria, bea, cal)}
    assert seen[aria] == seen[bea] == {shared.fact_id}
    assert seen[cal] == {own.fact_id}  # 0 leaks either way
    assert reads.fact(reads.owners(cal), shared.fact_id) is None
    engram.spaces.leave("family", "Bea")
    engram.views.ensure()
    assert reads.facts(reads.owners(bea)) == []
    with pytest.raises(NotFound):
        engram.facts.unpin("Bea", UUID(shared.fact_id))


def test_pins_archives_and_restatement(engram: Engram) -> None:
    _beings(engram, "Aria")
    w = engram.facts.state("Aria", _fact(importance=1))
    fact_id = UUID(w.fact_id)
    engram.facts.pin("Aria", fact_id)
    with pytest.raises(InvalidTransition):
        engram.facts.archive("Aria", fact_id)
    engram.facts.unpin("Aria", fact_id)
    engram.facts.archive("Aria", fact_id)
    before = _events(engram)
    with pytest.raises(InvalidTransition):
        engram.facts.pin("Aria", fact_id)
    assert _events(engram) == before
    again = engram.facts.state("Aria", _fact())
    assert (again.outcome, again.status) == ("reinforced", "active")


def test_entity_merges_refuse_cycles(engram: Engram) -> None:
    (aria,) = _beings(engram, "Aria")
    engram.facts.merge_entities("Aria", "person:makesh", "person:mukesh")
    with pytest.raises(DomainError):
        engram.facts.merge_entities("Aria", "person:mukesh", "person:makesh")
    engram.views.ensure()
    reads = engram.views.facts
    assert reads.aliases(reads.owners(aria)) == {"person:makesh": "person:mukesh"}
    engram.facts.unmerge_entities("Aria", "person:makesh")
    engram.views.ensure()
    assert reads.aliases(reads.owners(aria)) == {}


@bad_facts()
def test_bad_facts_are_refused_naming_the_field(
    engram: Engram, fields: dict[str, Any], field: str, code: str
) -> None:
    _beings(engram, "Aria")
    before = _events(engram)
    with pytest.raises((DomainError, ValueError)) as err:
        engram.facts.state("Aria", FactInput.model_validate(fields))
    if isinstance(err.value, DomainError):
        assert (err.value.code, err.value.details.get("field")) == (code, field)
    else:  # pydantic's refusal of what the type itself forbids (NUL)
        assert field in str(err.value)
    assert _events(engram) == before


def test_capacity_keeps_the_latest_80_and_pinned_facts(engram: Engram) -> None:
    (aria,) = _beings(engram, "Aria")
    old = engram.facts.state("Aria", _fact(text="The oldest fact, pinned", pinned=True))
    first = engram.facts.state("Aria", _fact(text="The first unpinned fact"))
    batch = [_fact(text=f"Fact number {i}") for i in range(ACTIVE_FACTS_PER_SUBJECT)]
    engram.facts.state_many("Aria", batch)
    engram.facts.state("Aria", _fact(text="Other subject", subject="john"))
    engram.views.ensure()
    reads = engram.views.facts
    active = reads.facts(reads.owners(aria), subject="mina", limit=1000)
    ids = {r["id"] for r in active}
    assert old.fact_id in ids and first.fact_id not in ids
    assert len(active) == ACTIVE_FACTS_PER_SUBJECT + 1  # the 80 latest, plus the older pinned one
    archived = engram.audit.history("fact", first.fact_id)[-1]
    assert (archived["type"], archived["payload"]["reason"]) == ("Fact.Archived", "capacity")
    assert engram.fact_capacity.enforce(aria, ["mina"], None) == 0  # again: nothing more


def test_lore_lines(engram: Engram) -> None:
    (aria,) = _beings(engram, "Aria")
    w = engram.facts.lore("Aria", "the harbour  floods in spring")
    engram.views.ensure()
    row = engram.views.facts.fact([str(aria)], w.fact_id)
    assert row is not None
    assert (row["text"], row["subject"], row["fact_type"], row["confidence"], row["source"]) == (
        "Memory line: the harbour floods in spring.", "__lore__", "lore", 0.72, "lore",
    )  # fmt: skip


def test_an_import_is_idempotent_and_refuses_lines_by_number(engram: Engram, tmp_path: Path) -> None:
    _beings(engram, "Aria")
    lines = [
        (1, json.dumps(GOOD)),
        (2, json.dumps({**GOOD, "text": "Mina likes tea", "importance": 2})),
        (3, json.dumps({**GOOD, "importance": 9})),
        (4, "not json"),
    ]
    report = import_facts(engram.facts, "Aria", lines)
    assert report.as_dict()["written"] == 2 and report.outcomes == {"stated": 2}
    assert [(r["line"], r["field"]) for r in report.refusals] == [(3, "importance"), (4, "line")]
    before = _events(engram)
    again = import_facts(engram.facts, "Aria", lines)
    assert (again.progress.written, again.progress.unchanged) == (0, 2)
    assert _events(engram) == before  # a re-run does not reinforce
    engram.views.ensure()
    rows = engram.views.facts.facts(engram.views.facts.owners(UUID(engram.beings.register("Bea").being_id)))
    assert rows == []


@pytest.mark.parametrize("space", [pytest.param(s, id=name) for name, s in BAD_SPACES])
def test_a_space_that_does_not_exist_or_lacks_the_being_is_refused(engram: Engram, space: str) -> None:
    _beings(engram, "Aria", "Bea")
    engram.spaces.create("family", ["Bea"])
    before = _events(engram)
    for write in (
        lambda: engram.facts.state("Aria", _fact(), space=space),
        lambda: engram.facts.lore("Aria", "the harbour floods", space=space),
        lambda: engram.facts.merge_entities("Aria", "person:a", "person:b", space=space),
    ):
        with pytest.raises(InvalidInput) as err:
            write()
        assert err.value.details["field"] == "space"
    assert _events(engram) == before


def test_lore_keeps_its_latest_120_lines(engram: Engram) -> None:
    (aria,) = _beings(engram, "Aria")
    from engram.services.facts import lore_content

    engram.facts.state_many("Aria", [lore_content(f"line {i}") for i in range(ACTIVE_LORE_LINES + 3)])
    engram.views.ensure()
    reads = engram.views.facts
    active = reads.facts(reads.owners(aria), subject="__lore__", limit=1000)
    assert len(active) == ACTIVE_LORE_LINES
    archived = reads.facts(reads.owners(aria), subject="__lore__", include_archived=True, limit=1000)
    assert len(archived) == ACTIVE_LORE_LINES + 3


def test_a_failing_follow_up_leaves_the_write_standing(engram: Engram) -> None:
    _beings(engram, "Aria")

    def failing(*_: Any) -> None:
        raise RuntimeError("the view is held back")

    engram.facts.after_write = failing
    written = engram.facts.state("Aria", _fact())
    assert written.outcome == "stated"
    assert engram.audit.history("fact", written.fact_id)[0]["type"] == "Fact.Stated"
