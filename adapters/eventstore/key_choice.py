"""Which key seals an event (ADR 0075): the item's, the subject's, or the being's.

Pure: decided from the event's topic, its aggregate's id and its state, so the mapper can ask it for
every event it writes without a lookup.

- An **item** (a note, a message, a fact) has a key of its own, key id = the item's id: forgetting
  the item destroys it. What quotes the item is sealed under a key that the item's forgetting
  destroys too: a node made from a note (its own key, tagged with the note), a message's extraction
  (the LLM prompt and answer quoting it: the message's key itself).
- A **subject** (a user of #10/#11) is known for a message (`user`), a fact (`subject`) and a
  conversation (`user`: its sessions, excerpts and summaries). Item keys carry the subject as a tag;
  a conversation's events are sealed under its own key (key id = the conversation id, itself derived
  from being and user), tagged with the subject. Forgetting the subject destroys every key so tagged.
  A conversation's summary (rolling, session, spine; ADR 0093) is sealed under a key of its own
  (`summary_key`), tagged with the conversation as its item.
- Everything else of a being stays under the being's key (ADR 0073). Every key is tagged with its
  being, so that forgetting the being destroys them all.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple
from uuid import UUID

SNAPSHOT_TOPIC = "eventsourcing.domain:Snapshot"
ITEM_KINDS = {"engram.Note": "note", "engram.Message": "message", "engram.Fact": "fact"}
"""Aggregate topic → the item kind `forget` names."""
_SUBJECT_FIELD = {"engram.Message": "user", "engram.Fact": "subject", "engram.Conversation": "user"}
_QUOTING = {"engram.MemoryNode": "source_note_id", "engram.Extraction": "message_id"}
"""Aggregates that quote an item, and the field naming it. A node gets a key of its own tagged with
its note (later node events do not name the note); an extraction is sealed under the message's key."""


class KeyChoice(NamedTuple):
    """The key an event is sealed under, and the tags recorded with it when it is first created.
    (A tuple: asked for every event a save writes, it is built faster than a frozen dataclass.)"""

    key_id: UUID
    being_id: UUID
    subject: str | None = None
    item_id: UUID | None = None  # the item whose forgetting destroys this key (None: the being's key)

    @property
    def is_being_key(self) -> bool:
        return self.key_id == self.being_id


def aggregate_topic(event_topic: str, event_state: dict[str, Any]) -> str:
    """`engram.Note` for `engram.Note.Noted`, and for a snapshot of a note."""
    if event_topic == SNAPSHOT_TOPIC:
        inner = event_state.get("topic")
        return inner if isinstance(inner, str) else event_topic
    return _aggregate_of(event_topic)


@cache
def _aggregate_of(event_topic: str) -> str:
    return event_topic.rsplit(".", 1)[0] if event_topic.count(".") >= 2 else event_topic


def _field(event_state: dict[str, Any], name: str) -> Any:
    if name in event_state:
        return event_state[name]
    inner = event_state.get("state")  # a snapshot: the aggregate's state
    return inner.get(name) if isinstance(inner, dict) else None


def choose_key(
    event_topic: str, originator_id: UUID, being_id: UUID, event_state: dict[str, Any]
) -> KeyChoice:
    aggregate = aggregate_topic(event_topic, event_state)
    subject_field = _SUBJECT_FIELD.get(aggregate)
    subject = _field(event_state, subject_field) if subject_field else None
    subject = subject if isinstance(subject, str) and subject else None
    if aggregate in ITEM_KINDS:
        return KeyChoice(originator_id, being_id, subject, originator_id)
    if aggregate == "engram.Conversation":
        # A summary (v2) has a key of its own, tagged with its conversation (forgetting the user
        # takes it) and destroyed by forgetting a message it covers (ADR 0093).
        summary_key = event_state.get("summary_key")
        if isinstance(summary_key, UUID):
            return KeyChoice(summary_key, being_id, None, originator_id)
        return KeyChoice(originator_id, being_id, subject, None)
    quoted_field = _QUOTING.get(aggregate)
    if quoted_field is not None:
        quoted = _field(event_state, quoted_field)
        if aggregate == "engram.Extraction" and isinstance(quoted, UUID):
            return KeyChoice(quoted, being_id, None, quoted)
        if aggregate == "engram.MemoryNode":
            return KeyChoice(originator_id, being_id, None, quoted if isinstance(quoted, UUID) else None)
    return KeyChoice(being_id, being_id)
