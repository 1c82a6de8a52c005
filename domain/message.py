"""Chat messages (issue #10, ADR 0052): what an agent hands Engram, one message at a time.

A message is kept verbatim in its `Message.Received` event, once per caller's message id (the
aggregate's id derives from it, so two deliveries of one id write one event). Its *cleaned* form
(`clean_message_text`) is what journals and fact extraction read; it is a pure function of the text,
so a rebuild derives the same lines the live intake wrote.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, PayloadTooLarge
from engram.domain.note import MAX_NOTE_TEXT_BYTES
from engram.domain.text import check_text

MAX_MESSAGE_TEXT_BYTES = MAX_NOTE_TEXT_BYTES  # "text over the note limit" is refused
MAX_MESSAGE_ID_CHARS = 200
MAX_USER_CHARS = 200
MAX_CHANNEL_CHARS = 200
MAX_AHEAD = timedelta(days=1)  # a message "at" more than a day ahead of the clock is a mistake
CLEAN_MAX_CHARS = 320  # spec 001: trimmed, whitespace collapsed, at most 320 characters
MIN_JOURNAL_CHARS = 4  # spec 001: shorter cleaned text is not journalled (nor extracted from)
MAX_PRIORITY = 10


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


def message_role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidInput(f"unknown role {role!r}; roles are user and assistant", field="role") from None


def clean_message_text(text: str) -> str:
    """Spec 001's cleaned form: trimmed, every run of whitespace one space, at most 320 characters."""
    return " ".join(text.split())[:CLEAN_MAX_CHARS].rstrip()


def journal_text(text: str) -> str | None:
    """The cleaned text a journal line (and extraction) takes, or None: empty or shorter than 4."""
    clean = clean_message_text(text)
    return clean if len(clean) >= MIN_JOURNAL_CHARS else None


def _label(field: str, value: str | None, limit: int, *, required: bool) -> None:
    if value is None:
        if required:
            raise InvalidInput(f"a message needs {field}", field=field)
        return
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.strip():
        raise InvalidInput(f"{field} has 1 to {limit} characters, not only spaces", field=field)
    check_text(field, value)


def check_message(
    *,
    message_key: str | None,
    user: str | None,
    text: str | None,
    channel: str | None,
    at: datetime | None,
    now: datetime,
    priority: int | None = None,
) -> None:
    """The intake's rules for one message, the same on every interface; each error names its field."""
    _label("id", message_key, MAX_MESSAGE_ID_CHARS, required=True)
    _label("user", user, MAX_USER_CHARS, required=True)
    _label("channel", channel, MAX_CHANNEL_CHARS, required=False)
    if text is None or not isinstance(text, str) or not text.strip():
        raise InvalidInput("a message needs text", field="text")
    check_text("text", text)
    size = len(text.encode("utf-8"))
    if size > MAX_MESSAGE_TEXT_BYTES:
        raise PayloadTooLarge(
            f"a message's text has at most {MAX_MESSAGE_TEXT_BYTES} bytes (UTF-8), got {size}",
            limit=MAX_MESSAGE_TEXT_BYTES,
            size=size,
            field="text",
        )
    if at is not None:
        if at.tzinfo is None or at.utcoffset() is None:
            raise InvalidInput("at needs a time zone (ISO 8601, e.g. 2026-11-27T14:00:00+00:00)", field="at")
        if at > now + MAX_AHEAD:
            raise InvalidInput("at lies more than a day in the future", field="at")
    if priority is not None and not 0 <= priority <= MAX_PRIORITY:
        raise InvalidInput(f"priority is 0 to {MAX_PRIORITY}", field="priority")


class Message(BeingScopedAggregate):
    """One chat message of a being's conversation with a user (or the being's own answer)."""

    TOPIC = "engram.Message"

    class Event(Aggregate.Event):
        TOPIC = "engram.Message.Event"
        being_id: UUID

    class Received(Event, Aggregate.Created):
        """The message as delivered (`text` verbatim), and where the intake placed it: its
        conversation, its session (None for a late message outside every session, ADR 0052) and its
        number in the conversation. `urgent` and `priority` are for the wake conditions of #12."""

        TOPIC = "engram.Message.Received"
        class_version = 1
        message_key: str
        user: str
        channel: str | None
        role: str
        text: str
        at: datetime
        conversation_id: UUID
        session_id: UUID | None
        number: int
        urgent: bool
        priority: int | None

    def __init__(
        self,
        being_id: UUID,
        message_key: str,
        user: str,
        channel: str | None,
        role: str,
        text: str,
        at: datetime,
        conversation_id: UUID,
        session_id: UUID | None,
        number: int,
        urgent: bool,
        priority: int | None,
    ) -> None:
        self.being_id = being_id
        self.message_key = message_key
        self.user = user
        self.channel = channel
        self.role = role
        self.text = text
        self.at = at
        self.conversation_id = conversation_id
        self.session_id = session_id
        self.number = number
        self.urgent = urgent
        self.priority = priority

    @classmethod
    def receive(
        cls,
        message_id: UUID,
        being_id: UUID,
        *,
        message_key: str,
        user: str,
        channel: str | None,
        role: Role | str,
        text: str,
        at: datetime,
        received_at: datetime,
        conversation_id: UUID,
        session_id: UUID | None,
        number: int,
        urgent: bool = False,
        priority: int | None = None,
    ) -> Message:
        check_message(message_key=message_key, user=user, text=text, channel=channel, at=at, now=received_at)
        return cls._create(
            cls.Received,
            id=message_id,
            being_id=being_id,
            timestamp=received_at,
            message_key=message_key,
            user=user,
            channel=channel,
            role=message_role(role).value,
            text=text,
            at=at,
            conversation_id=conversation_id,
            session_id=session_id,
            number=number,
            urgent=urgent,
            priority=priority,
        )

    @property
    def clean_text(self) -> str:
        return clean_message_text(self.text)

    def same_delivery(
        self, user: str, channel: str | None, role: str, text: str, at: datetime | None
    ) -> bool:
        """Whether a second delivery of this message id carries the same message (`at` counts only
        when it was given: without it, the delivery means "now", which a retry cannot repeat)."""
        if (self.user, self.channel, self.role, self.text) != (user, channel, role, text):
            return False
        return at is None or at == self.at

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.message_key,
            "user": self.user,
            "channel": self.channel,
            "role": self.role,
            "at": self.at.isoformat(),
        }
