"""Erasure of one subject and of one item (ADR 0075, 0076): `forget subject BEING --user U` and
`forget note|message|fact ID`.

Each item's events are sealed under a key of its own, and what quotes it (a node made from a note, a
message's extraction) under a key its forgetting destroys too; each key is tagged with its being and
its subject (`adapters/eventstore/key_choice.py`). Forgetting destroys the keys, then deletes the rows
of the erased aggregates from the views (`erasure_item_purge`, ADR 0089), rewrites the being's
journals without them, and appends an `Erased` receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import structlog

from engram.domain.base import BeingScopedAggregate
from engram.domain.conversation import Conversation
from engram.domain.erasure import ContentErased, Erasure
from engram.domain.errors import InvalidInput
from engram.domain.fact import Fact
from engram.domain.ids import (
    CALLERS_IDS,
    conversation_id_for,
    item_erasure_id,
    subject_erasure_id,
)
from engram.domain.message import Message
from engram.domain.note import Note
from engram.services.beings import parse_uuid, resolve_being
from engram.services.conversation_epochs import subject_epoch
from engram.services.erasure import Forgetting, Forgotten, unreadable
from engram.services.erasure_item_purge import purge_items
from engram.services.errors import Conflict, NotFound, ServiceError, WriteRaced
from engram.services.journal_markdown import journal_folder
from engram.services.message_quotes import message_quotes

log = structlog.get_logger(__name__)

ITEM_TYPES: dict[str, type[BeingScopedAggregate]] = {"note": Note, "message": Message, "fact": Fact}
Progress = Callable[[str, int, int], None]


class NotYours(ServiceError):
    """A being token asked to forget another being's item (403 over HTTP)."""

    code = "forbidden"


class ItemForgetting:
    def __init__(self, forgetting: Forgetting, refresh_journals: Callable[[UUID], Any]) -> None:
        self.f = forgetting
        self.refresh_journals = refresh_journals

    def _item_id(self, kind: str, ref: str, being: UUID | None) -> UUID:
        """The item `ref` names: Engram's id, or (with the being known) the caller's own id — a
        message's `id`, a note's idempotency key — as the intake turned it into one. Engram's id
        wins when it names an item (erased or not)."""
        as_id = parse_uuid(ref)
        from_key = CALLERS_IDS.get(kind)
        if being is None or from_key is None:
            if as_id is None:
                hint = " or, with its being named, your own id for it" if from_key is not None else ""
                raise InvalidInput(f"{ref!r} is not a {kind} id (a UUID{hint})", field="id")
            return as_id
        if as_id is not None and (
            self.f.storage.keys_of(as_id) or self.f.store.find(Erasure, item_erasure_id(as_id)) is not None
        ):
            return as_id
        return from_key(being, ref)

    def forget_item(
        self,
        kind: str,
        ref: str,
        *,
        by: str,
        being: UUID | None = None,
        progress: Progress | None = None,
    ) -> Forgotten:
        """Forget one note, message or fact. `ref`: its id, or, with `being` given, the caller's own id
        for a note or a message. `being`: the caller may only forget that being's items."""
        cls = ITEM_TYPES.get(kind)
        if cls is None:
            raise InvalidInput(f"cannot forget a {kind!r}: forget a note, a message or a fact", field="kind")
        item_id = self._item_id(kind, ref, being)
        receipt_id = item_erasure_id(item_id)
        receipt = self.f.store.find(Erasure, receipt_id)
        if receipt is not None:
            if being is not None and receipt.being_id != being:
                raise NotYours(f"{kind} {item_id} is not this being's")
            return Forgotten(
                scope=kind,
                being_id=receipt.being_id,
                already=True,
                erasure_id=receipt_id,
                message=f"{kind} {item_id} was already forgotten",
            )
        keys = self.f.storage.keys_of(item_id)
        if not keys:
            raise NotFound(f"no {kind} {ref}")
        if self.f.keys.is_destroyed(item_id):
            # Erased with its user or its being (their receipts say so): nothing is left to erase.
            raise NotFound(f"{kind} {item_id} was forgotten with its user or its being")
        try:
            item = self.f.store.find(cls, item_id)
        except ContentErased:
            raise NotFound(f"{kind} {item_id} was forgotten") from None
        if item is None or type(item) is not cls:
            raise NotFound(f"no {kind} {ref}")
        owner = UUID(str(item.being_id))
        if being is not None and owner != being:
            raise NotYours(f"{kind} {item_id} is not this being's")
        if keys != {item_id}:
            # ADR 0076: events of this item sealed under the being's key (written before item keys)
            # or in clear: destroying the item key would not erase them.
            raise Conflict(
                f"{kind} {item_id} was written before per-item keys: its text is sealed with its "
                "being's key and cannot be erased alone (forget the being), so nothing was erased"
                " (`engram keys seal` makes it erasable)"
            )
        self.f.storage.recover_tags(owner)  # tags a power cut lost (ADR 0075): found from the log
        key_ids = [item_id, *[k for k in self.f.keys.owned_keys(owner, item_id=item_id) if k != item_id]]
        if not isinstance(item, Message):
            return self._erase(kind, str(item_id), owner, key_ids, receipt_id, by, progress)
        # What its conversation quotes of it: the summaries covering it, each under its own key (ADR
        # 0093). The conversation's snapshots go (they counted those summaries) and its rows are
        # recomputed in place: its last user message and the summaries' due work as a rebuild gives them.
        quotes = message_quotes(self.f.store.events(item.conversation_id), item)
        if quotes.legacy:
            raise Conflict(
                f"message {item_id}'s words are also in {quotes.legacy} event(s) of its conversation "
                "written before summaries had keys of their own (its excerpt or a summary, sealed with "
                "the conversation's key): they cannot be erased alone (forget the user), so nothing "
                "was erased"
            )
        key_ids += [k for k in quotes.summary_keys if k not in key_ids]
        return self._erase(
            kind,
            str(item_id),
            owner,
            key_ids,
            receipt_id,
            by,
            progress,
            snapshots_of=[quotes.conversation_id],
            conversations=[quotes.conversation_id],
            then=lambda: self._withdraw(owner, quotes.conversation_id, len(quotes.summary_keys)),
        )

    def _withdraw(self, being_id: UUID, conversation_id: UUID, count: int) -> None:
        """Once the summaries' keys are gone, record the conversation's counters without them, so that
        another process holding it from before reads it as a replay does (ADR 0093)."""
        if not count:
            return
        for _ in range(5):  # a message taken meanwhile moves the conversation: load it again
            conversation = self.f.store.get(Conversation, conversation_id, being_id=being_id)
            conversation.withdraw_summaries(count, self.f.clock.now())
            try:
                self.f.store.save(conversation)
                return
            except WriteRaced:
                continue
        raise Conflict("the conversation kept changing while its summaries were withdrawn: run forget again")

    def forget_subject(
        self, being_ref: str, user: str, *, by: str, progress: Progress | None = None
    ) -> Forgotten:
        """Forget everything of one user within a being: their messages and the being's answers to
        them, their conversation (sessions, summaries), the facts about them, and what quotes those."""
        user = user.strip()
        if not user:
            raise InvalidInput("name the user to forget: --user U", field="user")
        being = resolve_being(self.f.store, being_ref)
        being_id = UUID(str(being.id))
        # The user's epoch (ADR 0089): forgotten `epoch` times before; what they said since is in
        # the conversation of that epoch, and this erasure's receipt is the epoch-th.
        epoch = subject_epoch(self.f.store, being_id, user)
        receipt_id = subject_erasure_id(being_id, user, epoch)
        self.f.storage.recover_tags(being_id)  # tags a power cut lost (ADR 0075): found from the log
        key_ids = self.f.keys.owned_keys(being_id, subject=user)
        if epoch and not key_ids:
            return Forgotten(
                scope="subject",
                being_id=being_id,
                already=True,
                erasure_id=subject_erasure_id(being_id, user, epoch - 1),
                message=f"user {user!r} of {being.name!r} was already forgotten",
            )
        if not key_ids:
            if self.f.storage.keys_of(conversation_id_for(being_id, user)):
                raise Conflict(
                    f"{user!r}'s conversation with {being.name!r} was written before per-subject keys: "
                    "it cannot be erased alone, so nothing was erased (`engram keys seal` makes it erasable)"
                )
            raise NotFound(f"{being.name!r} has nothing of a user {user!r}")
        for key_id in key_ids:
            if self.f.storage.keys_of(key_id) - {key_id}:
                raise Conflict(
                    f"some of {user!r}'s text in {being.name!r} was written before per-subject keys "
                    "(sealed with the being's key): it cannot be erased alone, so nothing was erased"
                    " (`engram keys seal` makes it erasable)"
                )
        # Keys of the subject's items carry the subject; what quotes them carries the item.
        quoting = {k for item in key_ids for k in self.f.keys.owned_keys(being_id, item_id=item)}
        all_keys = list(dict.fromkeys([*key_ids, *quoting]))
        # The receipt names the subject by its conversation's id, not by name: it stays in clear.
        target = str(conversation_id_for(being_id, user, epoch))
        return self._erase(
            "subject", target, being_id, all_keys, receipt_id, by, progress, label=f"user {user!r}"
        )

    def _erase(
        self,
        scope: str,
        target: str,
        being_id: UUID,
        key_ids: list[UUID],
        receipt_id: UUID,
        by: str,
        progress: Progress | None,
        *,
        label: str | None = None,
        snapshots_of: Sequence[UUID] = (),
        conversations: Sequence[UUID] = (),
        then: Callable[[], None] | None = None,
    ) -> Forgotten:
        """`snapshots_of`: aggregates whose snapshots go too (they hold state the erased events
        made); `conversations`: recomputed in place after the purge (a forgotten message's);
        `then`: run once the keys are destroyed and the caches dropped, before the purge."""
        f = self.f
        counts = {"keys": len(key_ids), "events": f.storage.sealed_under(set(key_ids))}
        being = resolve_being(f.store, str(being_id))
        folder = journal_folder(being.name, being_id)
        counts["keys_destroyed"] = f.keys.destroy_many(key_ids)
        for key_id in key_ids:
            f.storage.forget_cipher(key_id)
        f.store.cache.clear()
        counts["snapshots"] = sum(f.storage.drop_sealed_snapshots(k) for k in [*key_ids, *snapshots_of])
        if then is not None:
            then()
        counts.update(purge_items(f, being_id, key_ids, progress, conversations=conversations))
        # The journals mix the being's days and users: rewritten whole from the purged views.
        counts["journal_files"] = f.journals.remove(folder)
        if counts["journal_files"]:
            self.refresh_journals(being_id)
        receipt = Erasure.record(receipt_id, being_id, scope, target, by, counts, f.clock.now())
        position = f.store.save(receipt)
        counts["files_scrubbed"] = len(f.storage.scrub())
        log.info("forgotten", scope=scope, being_id=str(being_id), by=by, **counts)
        what = label or f"{scope} {target}"
        return Forgotten(
            scope=scope,
            being_id=being_id,
            already=False,
            erasure_id=receipt.id,
            position=position,
            counts=counts,
            message=f"{what} forgotten: {unreadable(counts['events'])}",
        )
