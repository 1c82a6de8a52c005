"""Taking chat messages (issue #10, ADR 0052): exactly once per message id, placed in sessions.

A batch is one transaction: each message's `Message` and its user's `Conversation` are saved
together, so a message is counted in its session exactly when it is in the log. Two deliveries of
one id race on the message's first version: one is written, the other runs again, finds it, and
answers `duplicate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from engram.domain.conversation import Conversation
from engram.domain.errors import DomainError, InvalidInput
from engram.domain.ids import message_id_for_key
from engram.domain.message import Message, check_message, journal_text
from engram.services.beings import resolve_being_id
from engram.services.commands import MAX_BATCH_MESSAGES, MessageInput, MessagesTaken, MessageTaken
from engram.services.conversation_epochs import current_conversations, find_readable
from engram.services.errors import Conflict
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore


def _result(message: Message, *, duplicate: bool, position: int | None) -> MessageTaken:
    return MessageTaken(
        id=message.message_key,
        message_id=str(message.id),
        being_id=str(message.being_id),
        user=message.user,
        role=message.role,
        at=message.at.isoformat(),
        conversation_id=str(message.conversation_id),
        session_id=str(message.session_id) if message.session_id is not None else None,
        number=message.number,
        journalled=journal_text(message.text) is not None,
        duplicate=duplicate,
        position=position,
    )


def check_input(item: MessageInput, now: datetime) -> None:
    """The domain's rules for one message as an interface gave it (`InvalidInput` naming the field)."""
    check_message(
        message_key=item.id,
        user=item.user,
        text=item.text,
        channel=item.channel,
        at=item.at,
        now=now,
        priority=item.priority,
    )


def refusal(exc: DomainError, index: int) -> dict[str, Any]:
    """How a refused message of a batch is reported: its index, the field and why."""
    return {"index": index, "code": exc.code, "field": exc.details.get("field"), "message": exc.message}


def _erased(key: str, message_id: UUID) -> Conflict:
    return Conflict(
        f"message id {key!r} was forgotten (erased): it is not taken again; new words take a new id",
        field="id",
        message_id=str(message_id),
    )


class MessageCommands:
    def __init__(
        self, store: AggregateStore, clock: Clock, runner: CommandRunner, session_gap: timedelta
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self.session_gap = session_gap

    def take(self, being_ref: str, message: MessageInput) -> MessageTaken:
        return self.take_many(being_ref, [message]).messages[0]

    def take_many(
        self, being_ref: str, messages: Sequence[MessageInput], *, skip_refused: bool = False
    ) -> MessagesTaken:
        """Take `messages` in one transaction, in their order.

        A message refused (invalid, or its id taken before with other content) refuses the batch,
        naming its index — or, with `skip_refused`, is left out and reported in `refused` while the
        others are taken (what an import wants: one bad line does not stop it).
        """
        if not messages:
            raise InvalidInput("a batch holds at least one message")
        if len(messages) > MAX_BATCH_MESSAGES:
            raise InvalidInput(f"a batch holds at most {MAX_BATCH_MESSAGES} messages, got {len(messages)}")
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> MessagesTaken:
            now = self.clock.now()
            refused: list[dict[str, Any]] = []
            valid: list[tuple[int, MessageInput, UUID]] = []
            for i, item in enumerate(messages):
                try:
                    check_input(item, now)
                except InvalidInput as exc:
                    self._refuse(exc, i, len(messages), refused, skip_refused)
                    continue
                valid.append((i, item, message_id_for_key(being_id, item.id)))
            existing, erased = find_readable(self.store, Message, [m for _, _, m in valid], being_id)
            if erased:
                # A retried delivery of a forgotten message (ADR 0089): not taken again, its words stay gone.
                kept = []
                for i, item, message_id in valid:
                    if message_id in erased:
                        self._refuse(_erased(item.id, message_id), i, len(messages), refused, skip_refused)
                    else:
                        kept.append((i, item, message_id))
                valid = kept
            users = {item.user for _, item, mid in valid if mid not in existing}
            conversation_ids, conversations = current_conversations(self.store, being_id, users)
            results: dict[int, MessageTaken] = {}
            fresh: list[tuple[int, Message]] = []
            touched: dict[UUID, Conversation] = {}
            for i, item, message_id in valid:
                earlier = existing.get(message_id)
                if earlier is not None:
                    if not earlier.same_delivery(
                        item.user, item.channel, item.role.value, item.text, item.at
                    ):
                        conflict = Conflict(
                            f"message id {item.id!r} was taken before with other content",
                            field="id",
                            message_id=str(message_id),
                        )
                        self._refuse(conflict, i, len(messages), refused, skip_refused)
                        continue
                    results[i] = _result(earlier, duplicate=True, position=None)
                    continue
                conversation_id = conversation_ids[item.user]
                conversation = touched.get(conversation_id) or conversations.get(conversation_id)
                if conversation is None:
                    conversation = Conversation.start(conversation_id, being_id, item.user, now)
                touched[conversation_id] = conversation
                at = item.at or now
                session_id, number = conversation.hear(
                    message_id, at, item.role, item.text, now, self.session_gap
                )
                message = Message.receive(
                    message_id,
                    being_id,
                    message_key=item.id,
                    user=item.user,
                    channel=item.channel,
                    role=item.role,
                    text=item.text,
                    at=at,
                    received_at=now,
                    conversation_id=conversation_id,
                    session_id=session_id,
                    number=number,
                    urgent=item.urgent,
                    priority=item.priority,
                )
                existing[message_id] = message  # the same id again in this batch is a duplicate
                fresh.append((i, message))
            position = self.store.save(*touched.values(), *(m for _, m in fresh)) if fresh else None
            for i, message in fresh:
                results[i] = _result(message, duplicate=False, position=position)
            return MessagesTaken(
                messages=[results[i] for i in sorted(results)], refused=refused, position=position
            )

        return self.runner.run("take_messages", handle, being_id=being_id)

    @staticmethod
    def _refuse(exc: DomainError, index: int, count: int, refused: list[dict[str, Any]], skip: bool) -> None:
        if skip:
            refused.append(refusal(exc, index))
            return
        if count > 1:
            exc.details["index"] = index
            exc.message = f"message {index}: {exc.message}"
            exc.args = (exc.message,)
        raise exc

    def close_idle(
        self, being_ref: str, conversation_ids: Sequence[UUID], now: datetime | None = None
    ) -> int:
        """Close the open sessions of `conversation_ids` that no message reached for the session gap
        (the worker's step, with its clock reading recorded); how many closed."""
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> int:
            at = now or self.clock.now()
            found = self.store.find_many(Conversation, conversation_ids, being_id=being_id)
            closed = [c for c in found.values() if c.close_idle(at, self.session_gap)]
            if closed:
                self.store.save(*closed)
            return len(closed)

        return self.runner.run("close_idle_sessions", handle, being_id=being_id)
