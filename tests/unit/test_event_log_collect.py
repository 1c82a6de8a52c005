"""`EventLog.save` collects pending events as the library's `Application.save` does, only faster."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from uuid import uuid4

from eventsourcing.application import ProcessingEvent

from engram.adapters.eventstore.event_log import _ProcessingEvent
from engram.domain.being import Being
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object


def test_collect_events_matches_the_library() -> None:
    now = datetime(2026, 5, 2, tzinfo=UTC)
    being, business, private = Being.register("Aria", now)
    scene = validate_scene_object({"action": "a", "actors": ["me"], "when": ["2026-05-02"]})
    node = MemoryNode.create(uuid4(), scene, business, 0, now)
    loose = MemoryNode.create(uuid4(), scene, private, 0, now)
    (event,) = loose.collect_events()  # a domain event given on its own, between aggregates
    objs = (being, None, event, business, node, private)

    ours, theirs = _ProcessingEvent(), ProcessingEvent()
    ours.collect_events(*copy.deepcopy(objs), tracking_hint=1)
    theirs.collect_events(*copy.deepcopy(objs), tracking_hint=1)

    def shape(p: ProcessingEvent) -> tuple[object, ...]:  # type: ignore[type-arg]
        return (
            [(type(e), e.originator_id, e.originator_version) for e in p.events],
            {k: (type(a), a.version) for k, a in p.aggregates.items()},
            list(p.aggregates),
            p.saved_kwargs,
        )

    assert shape(ours) == shape(theirs)
    assert len(ours.events) == 5  # one per aggregate, and the loose event in its place
