"""Which conversation a user's new message goes to, once the user may have been forgotten (ADR 0089).

`forget subject` destroys the key of the user's conversation (id uuid5(being, user)): its events
read as erased from then on. A user who comes back starts afresh: their conversation's id takes an
epoch, the number of `Erased` receipts of that user in the being (receipts stay in clear, so the
epoch is read from the log, the same in every copy of it). The usual path pays nothing: the epoch
is looked up only for a user whose conversation reads as erased.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar
from uuid import UUID

from engram.domain.base import BeingScopedAggregate
from engram.domain.conversation import Conversation
from engram.domain.erasure import ContentErased, Erasure
from engram.domain.ids import conversation_id_for, subject_erasure_id
from engram.services.store import AggregateStore

A = TypeVar("A", bound=BeingScopedAggregate)


def subject_epoch(store: AggregateStore, being_id: UUID, user: str) -> int:
    """How many times `user` was forgotten in the being: their receipts, counted from 0."""
    epoch = 0
    while store.find(Erasure, subject_erasure_id(being_id, user, epoch)) is not None:
        epoch += 1
    return epoch


def find_readable(
    store: AggregateStore, cls: type[A], ids: Sequence[UUID], being_id: UUID
) -> tuple[dict[UUID, A], set[UUID]]:
    """`find_many`, and the ids whose events read as erased (their key destroyed) apart."""
    try:
        return store.find_many(cls, ids, being_id=being_id), set()
    except ContentErased:
        found: dict[UUID, A] = {}
        erased: set[UUID] = set()
        for i in dict.fromkeys(ids):  # one by one, only when some are erased
            try:
                found.update(store.find_many(cls, [i], being_id=being_id))
            except ContentErased:
                erased.add(i)
        return found, erased


def current_conversations(
    store: AggregateStore, being_id: UUID, users: Iterable[str]
) -> tuple[dict[str, UUID], dict[UUID, Conversation]]:
    """Each user's current conversation id, and those conversations that exist."""
    ids = {user: conversation_id_for(being_id, user) for user in users}
    found, erased = find_readable(store, Conversation, list(ids.values()), being_id)
    for user, first in ids.items():
        if first not in erased:
            continue
        # Forgotten: the conversation of the epoch after the last receipt (a refusal, ContentErased,
        # if that one reads as erased too: an erasure under way, its receipt not yet written).
        ids[user] = conversation_id_for(being_id, user, subject_epoch(store, being_id, user))
        found.update(store.find_many(Conversation, [ids[user]], being_id=being_id))
    return ids, found
