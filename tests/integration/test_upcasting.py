"""Reading a v1 event through v2 code (docs/architecture.md, "Event evolution").

A stored event carries its class version only when it is above 1. When a
class moves to version 2 it gains `upcast_v1_v2(state)`, which the mapper
applies to every older record before the event object is built. Here the
"v1" record is written as bytes exactly as v1 code wrote them, then read back
through a v2 class.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import StoredEvent

from engram.services.bootstrap import Engram


class Memo(Aggregate):
    """A stand-in for any Engram aggregate whose created event grew a field."""

    TOPIC = "engram.test.Memo"

    class Event(Aggregate.Event):
        TOPIC = "engram.test.Memo.Event"

    class Created(Event, Aggregate.Created):
        TOPIC = "engram.test.Memo.Created"
        class_version = 2
        text: str
        language: str  # new in v2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # v1 never recorded a language; "und" is BCP 47 for "undetermined".
            state["language"] = "und"

    def __init__(self, text: str, language: str) -> None:
        self.text = text
        self.language = language


def test_a_v1_event_reads_through_v2_code(engram: Engram) -> None:
    memo_id = uuid4()
    v1_bytes = (
        b'{"timestamp":{"_type_":"datetime_iso","_data_":"2025-01-01T00:00:00+00:00"},'
        b'"originator_topic":"engram.test.Memo","text":"old memo"}'
    )
    engram.store.app.recorder.insert_events(
        [
            StoredEvent(
                originator_id=memo_id, originator_version=1, topic="engram.test.Memo.Created", state=v1_bytes
            )
        ]
    )
    memo = engram.store.app.repository.get(memo_id)
    assert isinstance(memo, Memo)
    assert (memo.text, memo.language) == ("old memo", "und")

    # New events are written as v2 and read back unchanged.
    fresh = Memo._create(Memo.Created, id=uuid4(), text="new memo", language="en")
    engram.store.save(fresh)
    stored = engram.store.notifications(engram.store.head(), 1)[0]
    assert b'"class_version":2' in stored.state
    assert engram.store.app.repository.get(fresh.id).language == "en"
    assert isinstance(memo_id, UUID)
