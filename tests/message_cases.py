"""Messages every interface refuses the same way (issue #10): each case's fields (as `MessageInput`
takes them, JSON-like), the field the error must name, and its code. Python, the CLI (`engram message`
and `engram messages import`), HTTP and MCP run the same list."""

from __future__ import annotations

from typing import Any

import pytest

from engram.domain.message import MAX_MESSAGE_TEXT_BYTES

GOOD: dict[str, Any] = {"id": "m-1", "user": "mina", "text": "Shall we plant the tomatoes?"}


def without(name: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != name}


BAD_MESSAGES: list[tuple[str, dict[str, Any], str, str]] = [
    ("no id", without("id"), "id", "invalid_input"),
    ("no user", without("user"), "user", "invalid_input"),
    ("no text", without("text"), "text", "invalid_input"),
    ("blank text", {**GOOD, "text": "   "}, "text", "invalid_input"),
    ("blank user", {**GOOD, "user": " "}, "user", "invalid_input"),
    ("unknown role", {**GOOD, "role": "bot"}, "role", "invalid_input"),
    (
        "text over the note limit",
        {**GOOD, "text": "x" * (MAX_MESSAGE_TEXT_BYTES + 1)},
        "text",
        "payload_too_large",
    ),
    ("at not ISO 8601", {**GOOD, "at": "yesterday at noon"}, "at", "invalid_input"),
    ("at without a zone", {**GOOD, "at": "2026-11-01T10:00:00"}, "at", "invalid_input"),
    ("at a year ahead", {**GOOD, "at": "2099-01-01T00:00:00+00:00"}, "at", "invalid_input"),
    ("NUL in the text", {**GOOD, "text": "plant\x00tomatoes"}, "text", "invalid_input"),
    ("NUL in the user", {**GOOD, "user": "mi\x00na"}, "user", "invalid_input"),
    ("NUL in the id", {**GOOD, "id": "m\x001"}, "id", "invalid_input"),
    ("priority 11", {**GOOD, "priority": 11}, "priority", "invalid_input"),
]


def bad_messages(*skip: str) -> Any:
    """The cases as pytest parameters (`fields`, `field`, `code`), without those an interface cannot
    express."""
    return pytest.mark.parametrize(
        ("fields", "field", "code"),
        [pytest.param(f, n, c, id=name) for name, f, n, c in BAD_MESSAGES if name not in skip],
    )
