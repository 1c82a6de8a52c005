"""Helpers for the session and summary tests (issue #10, ADR 0053): a chat taken message by message."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.services.bootstrap import Engram
from engram.services.commands import MessageInput

T0 = datetime(2026, 10, 30, 10, 0, tzinfo=UTC)

CHAT = [
    ("user", "Hi! I'm Lena, I work as a nurse at the city hospital."),
    ("assistant", "Nice to meet you, Lena. How is work at the hospital going?"),
    ("user", "The hospital night shifts are hard. My brother Tomas helps with the garden."),
    ("assistant", "Night shifts at the hospital sound hard. Does Tomas live near you?"),
    ("user", "Yes, Tomas lives next door. I need to renew my nursing licence before March."),
    ("assistant", "I'll remind you about the nursing licence next week."),
    ("user", "Thanks. I'm also planning a garden project with Tomas this spring."),
    ("assistant", "A garden project sounds great. What will you plant in the garden?"),
    ("user", "Tomatoes and beans in the garden. Should I start the seeds indoors?"),
    ("assistant", "Yes, start the tomato seeds indoors in February."),
    ("user", "I will buy seeds on Saturday with Tomas."),
    ("assistant", "Good plan. Enjoy the garden with Tomas!"),
]


def chat(
    engram: Engram,
    being: str,
    user: str,
    lines: Sequence[tuple[str, str]],
    *,
    start: datetime = T0,
    every: timedelta = timedelta(minutes=1),
    prefix: str = "m",
) -> list[Any]:
    """Take `lines` (role, text) as messages of `user`, `every` apart from `start`, one call each."""
    taken = []
    for i, (role, text) in enumerate(lines):
        message = MessageInput(
            id=f"{prefix}{i}",
            user=user,
            role=role,
            text=text,
            at=start + i * every,  # type: ignore[arg-type]
        )
        taken.append(engram.messages.take(being, message))
    return taken


def summarize(engram: Engram, being: str | None = None) -> Any:
    engram.views.ensure()
    return engram.summaries.run_due(being)


def rows(engram: Engram, being_id: Any, kind: str) -> list[dict[str, Any]]:
    engram.views.ensure()
    return engram.views.conversations.summaries(being_id, kind=kind, limit=100)
