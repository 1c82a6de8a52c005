"""Deterministic identifiers.

Ids that must be the same in two racing processes (a being's name, an
idempotency key, a patrol cycle, the node a note becomes) are UUIDv5 values
derived from stable inputs. Random ids are drawn by the application layer and
passed in.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from uuid import UUID, uuid5

ENGRAM_NAMESPACE = UUID("0d3c8a52-5b8e-4f4e-9a57-9c1e6c1f2a10")


def normalise_being_name(name: str) -> str:
    """NFC and trimmed: two spellings that render the same are the same name."""
    return unicodedata.normalize("NFC", name).strip()


def being_id_for_name(name: str) -> UUID:
    return uuid5(ENGRAM_NAMESPACE, "being:" + normalise_being_name(name))


def root_cluster_id(being_id: UUID, root_name: str) -> UUID:
    return uuid5(being_id, "root-cluster:" + root_name)


def note_id_for_key(being_id: UUID, idempotency_key: str) -> UUID:
    return uuid5(being_id, "note:" + idempotency_key)


def node_id_for_note(note_id: UUID) -> UUID:
    """The node a scene note becomes: re-running patrol cannot create it twice."""
    return uuid5(note_id, "node")


def patrol_run_id(being_id: UUID, cycle: int) -> UUID:
    return uuid5(being_id, f"patrol-run:{cycle}")


def soul_chain_id(being_id: UUID) -> UUID:
    """The being's one `SoulChain`: two processes taking a soul at once write the same aggregate."""
    return uuid5(being_id, "soul-chain")


def message_id_for_key(being_id: UUID, message_key: str) -> UUID:
    """A message's aggregate id, from the caller's message id: two deliveries of one id write one
    aggregate, so the log keeps one (ADR 0052)."""
    return uuid5(being_id, "message:" + message_key)


def conversation_id_for(being_id: UUID, user: str, epoch: int = 0) -> UUID:
    """The being's `Conversation` with `user`: every message of theirs moves it. `epoch`: how many
    times the user was forgotten before it (ADR 0089): a user who comes back after `forget subject`
    starts a new conversation, under a new key; epoch 0 keeps the id conversations always had."""
    return uuid5(being_id, "conversation:" + user + (f"#{epoch}" if epoch else ""))


def item_erasure_id(item_id: UUID) -> UUID:
    """The receipt of forgetting one note, message or fact (`forget note|message|fact`)."""
    return uuid5(item_id, "erasure:item")


def subject_erasure_id(being_id: UUID, user: str, epoch: int = 0) -> UUID:
    """The receipt of the `epoch`-th forgetting (from 0) of `user` in a being: the receipts counted
    from 0 give the user's current conversation epoch."""
    return uuid5(being_id, f"erasure:subject:{user}" + (f"#{epoch}" if epoch else ""))


def session_id_for(conversation_id: UUID, ordinal: int) -> UUID:
    """The `ordinal`-th session (from 1) of a conversation."""
    return uuid5(conversation_id, f"session:{ordinal}")


def space_id_for_name(name: str) -> UUID:
    """A space's id, from its name: the name is unique (issue #11)."""
    return uuid5(ENGRAM_NAMESPACE, "space:" + normalise_being_name(name))


def fact_id_for_key(owner_id: UUID, key: str) -> UUID:
    """A fact's id, from its owner and its key (`domain.fact.fact_key`): a fact stated again is the
    same aggregate, also when two writers race (ADR 0056)."""
    return uuid5(owner_id, "fact:" + key)


def entity_map_id(owner_id: UUID) -> UUID:
    """The owner's one `EntityMap` of aliases."""
    return uuid5(owner_id, "entity-map")


def extraction_id_for_message(message_id: UUID) -> UUID:
    """A message's extraction record (ADR 0058): one per message, so a message is extracted once."""
    return uuid5(message_id, "extraction")


def extraction_cursor_id(being_id: UUID) -> UUID:
    """A being's extraction cursor: where extraction was skipped up to (no LLM, ADR 0058)."""
    return uuid5(being_id, "extraction-cursor")


CALLERS_IDS: dict[str, Callable[[UUID, str], UUID]] = {"note": note_id_for_key, "message": message_id_for_key}
"""The kinds a caller names by an id of its own (ADR 0052's message id, a note's idempotency key):
`forget` and `why` take it beside Engram's id."""
