"""The `MemoryLinks` aggregate (ADR 0062): a memory's linking, checked, and the removal of links."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from engram.domain.errors import InvalidInput
from engram.domain.links import MemoryLinks, links_id_for

AT = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


def _linked(*others: tuple[str, float]) -> MemoryLinks:
    return MemoryLinks.link(
        uuid4(),
        uuid4(),
        "node",
        [{"id": o, "kind": "node", "score": s} for o, s in others],
        threshold=0.7,
        model="m",
        at=AT,
    )


def test_linking_records_the_links_once_at_a_deterministic_id() -> None:
    a, b = str(uuid4()), str(uuid4())
    links = _linked((a, 0.91234567), (b, 0.7))
    assert links.id == links_id_for(links.being_id, links.memory_id)
    assert links.links == [
        {"id": a, "kind": "node", "score": 0.912346},
        {"id": b, "kind": "node", "score": 0.7},
    ]
    assert links.processed_at == AT and links.threshold == 0.7
    [event] = links.collect_events()
    assert isinstance(event, MemoryLinks.Linked)


@pytest.mark.parametrize(
    ("kind", "link", "field"),
    [
        ("note", {"kind": "node", "score": 0.9}, "memory_kind"),
        ("node", {"kind": "message", "score": 0.9}, "links"),
        ("node", {"kind": "node", "score": 0.69}, "links"),
    ],
)
def test_bad_links_are_refused_by_field(kind: str, link: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as bad:
        MemoryLinks.link(
            uuid4(), uuid4(), kind, [{"id": str(uuid4()), **link}], threshold=0.7, model="m", at=AT
        )
    assert bad.value.details["field"] == field


def test_a_memory_is_not_linked_to_itself() -> None:
    me = uuid4()
    with pytest.raises(InvalidInput):
        MemoryLinks.link(
            uuid4(),
            me,
            "node",
            [{"id": str(me), "kind": "node", "score": 1.0}],
            threshold=0.7,
            model="m",
            at=AT,
        )


def test_unlinking_removes_present_links_once_with_a_known_reason() -> None:
    a, b = str(uuid4()), str(uuid4())
    links = _linked((a, 0.8), (b, 0.9))
    links.collect_events()
    assert links.unlink([a, str(uuid4())], "died", AT) is True
    assert [link["id"] for link in links.links] == [b]
    assert links.unlink([a], "died", AT) is False  # already gone: nothing recorded
    [event] = links.collect_events()
    assert isinstance(event, MemoryLinks.Unlinked) and event.other_ids == [a] and event.reason == "died"
    with pytest.raises(InvalidInput):
        links.unlink([b], "bored", AT)
