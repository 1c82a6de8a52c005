"""A new soul note supersedes the being's current soul, in the same transaction (spec 002, ADR 0047).

The current soul is read from the being's `SoulChain`, not from the notes view: the chain is written
with every soul, so two souls taken at once conflict on it and the runner runs the later command
again, which then finds the first soul and supersedes it. Exactly one soul stays active.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.ids import soul_chain_id
from engram.domain.note import Note, NoteKind, SupersedeReason
from engram.domain.soul_chain import SoulChain
from engram.services.errors import NotFound
from engram.services.store import AggregateStore

MAX_CHAIN_STEPS = 10_000  # a supersede chain cannot loop (ADR 0046); this only bounds a broken log


def _latest(store: AggregateStore, note_id: UUID | None, being_id: UUID) -> Note | None:
    """The end of the supersede chain that starts at `note_id`: the soul's replacement, if a manual
    supersede or a merge replaced it since."""
    note: Note | None = None
    for _ in range(MAX_CHAIN_STEPS):
        if note_id is None:
            return note
        try:
            note = store.get(Note, note_id, being_id=being_id)
        except NotFound:
            return note
        note_id = note.superseded_by
    return note


def replace_souls(
    store: AggregateStore, being_id: UUID, fresh: Sequence[Note], at: datetime
) -> tuple[list[Aggregate], dict[UUID, list[UUID]]]:
    """Each soul among `fresh` (notes about to be saved, in their order) supersedes the soul before
    it: the being's current one for the first, the previous one of the batch for the next (the later
    one wins). Returns the aggregates to save with `fresh` (the chain, a replaced soul from the log)
    and, by new soul, the ids it superseded."""
    souls = [n for n in fresh if n.kind == NoteKind.SOUL]
    if not souls:
        return [], {}
    chain_id = soul_chain_id(being_id)
    try:
        chain = store.get(SoulChain, chain_id, being_id=being_id)
    except NotFound:
        chain = SoulChain.start(chain_id, being_id, at)
    current = _latest(store, chain.current, being_id)
    to_save: list[Aggregate] = [chain]
    replaced: dict[UUID, list[UUID]] = {}
    for soul in souls:
        if current is not None and current.kind == NoteKind.SOUL and current.superseded_by is None:
            current.supersede(soul, at, reason=SupersedeReason.SOUL)
            replaced[soul.id] = [current.id]
            if current not in fresh:
                to_save.append(current)
        chain.move(soul.id, at)
        current = soul
    return to_save, replaced
