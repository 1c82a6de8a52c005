"""The Fact aggregate's rules (ADR 0056/0057): keyed restatement, reinforcement, pins, archive, lore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.fact import (
    ArchiveReason,
    Fact,
    FactContent,
    fact_key,
    lore_text,
    reinforced_importance,
)
from engram.services.facts import lore_content

AT = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _fact(text: str = "Mina lives in Austin", **kw: object) -> Fact:
    content = FactContent(text, "mina", **kw)  # type: ignore[arg-type]
    return Fact.state(uuid4(), uuid4(), "being", uuid4(), content, AT)


def test_the_same_text_is_reinforced_and_a_keyed_change_is_revised() -> None:
    f = _fact("Mina lives in Austin", memory_key="profile|person|mina|fact")
    assert f.restate(FactContent("Mina lives in Austin", "mina", memory_key="profile|person|mina|fact"),
                     uuid4(), AT + timedelta(seconds=1)) == "reinforced"  # fmt: skip
    assert (f.version, f.reinforcements, f.importance) == (2, 1, 2)
    moved = FactContent("Mina lives in Denver", "mina", memory_key="profile|person|mina|fact")
    assert f.restate(moved, uuid4(), AT + timedelta(seconds=2)) == "revised"
    assert (f.text, f.version, f.reinforcements, f.importance) == ("Mina lives in Denver", 3, 0, 1)


def test_unkeyed_facts_are_keyed_by_subject_and_casefolded_text() -> None:
    a = FactContent("Mina  lives in AUSTIN", "mina")
    b = FactContent("mina lives in austin", "mina")
    assert fact_key(a) == fact_key(b) != fact_key(FactContent("mina lives in austin", "john"))


@pytest.mark.parametrize(
    ("stated", "n", "expected"), [(1, 0, 1), (1, 1, 2), (1, 2, 2), (1, 3, 3), (0, 1, 1), (2, 7, 3), (3, 0, 3)]
)
def test_the_reinforcement_rule(stated: int, n: int, expected: int) -> None:
    assert reinforced_importance(stated, n, pinned=False) == expected
    assert reinforced_importance(stated, n, pinned=True) == 3


def test_restating_many_times_rises_at_the_first_third_and_seventh_restatement() -> None:
    f = _fact(importance=0)
    seen = []
    for i in range(8):
        f.restate(
            FactContent("Mina lives in Austin", "mina", importance=0), uuid4(), AT + timedelta(seconds=i + 1)
        )
        seen.append(f.importance)
    assert seen == [1, 1, 2, 2, 2, 2, 3, 3]


def test_pin_forces_3_and_unpin_restores_what_statements_gave() -> None:
    f = _fact(importance=1)
    f.restate(FactContent("Mina lives in Austin", "mina"), uuid4(), AT)
    f.pin(AT)
    assert (f.pinned, f.importance) == (True, 3)
    f.unpin(AT)
    assert (f.pinned, f.importance) == (False, 2)


def test_a_pinned_fact_is_never_archived_and_an_archived_one_is_not_pinned() -> None:
    f = _fact()
    f.pin(AT)
    with pytest.raises(InvalidTransition):
        f.archive(AT, ArchiveReason.CAPACITY)
    f.unpin(AT)
    f.archive(AT, ArchiveReason.CAPACITY)
    version = f.version
    f.archive(AT, ArchiveReason.CAPACITY)  # archiving twice writes nothing (capacity races)
    assert (f.status, f.version) == ("archived", version)
    with pytest.raises(InvalidTransition):
        f.pin(AT)


def test_an_archived_fact_stated_again_is_active() -> None:
    f = _fact()
    f.archive(AT)
    f.restate(FactContent("Mina lives in Austin", "mina"), uuid4(), AT)
    assert f.status == "active"


def test_lore_lines() -> None:
    assert lore_text("  the  harbour   floods in spring. ") == "Memory line: the harbour floods in spring."
    c = lore_content("the harbour floods in spring")
    assert (c.subject, c.fact_type, c.confidence, c.source) == ("__lore__", "lore", 0.72, "lore")
    for blank in ("", "   ", " . "):
        with pytest.raises(InvalidInput) as err:
            lore_content(blank)
        assert err.value.details["field"] == "text"
