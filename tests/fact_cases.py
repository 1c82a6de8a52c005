"""Facts every interface refuses the same way (issue #11): each case's fields (as `FactInput` takes
them, JSON-like), the field the error must name, and its code. Python, the CLI (`engram facts add`
and `engram facts import`), HTTP and MCP run the same list; nothing is written for any of them."""

from __future__ import annotations

from typing import Any

import pytest

from engram.domain.fact import MAX_FACT_CHARS

GOOD: dict[str, Any] = {"subject": "mina", "text": "Mina lives in Austin", "type": "profile"}

BAD_FACTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("text over the bound", {**GOOD, "text": "x" * (MAX_FACT_CHARS + 1)}, "text", "invalid_input"),
    ("text too short", {**GOOD, "text": "ok"}, "text", "invalid_input"),
    ("a ref without a type", {**GOOD, "entity_refs": ["john"]}, "entity_refs.0", "invalid_input"),
    ("a ref with spaces", {**GOOD, "entity_refs": ["person:John Doe"]}, "entity_refs.0", "invalid_input"),
    ("importance 4", {**GOOD, "importance": 4}, "importance", "invalid_input"),
    ("importance -1", {**GOOD, "importance": -1}, "importance", "invalid_input"),
    ("confidence 1.5", {**GOOD, "confidence": 1.5}, "confidence", "invalid_input"),
    ("source trust -0.1", {**GOOD, "source_trust": -0.1}, "source_trust", "invalid_input"),
    ("unknown type", {**GOOD, "type": "gossip"}, "type", "invalid_input"),
    ("a bad memory key", {**GOOD, "memory_key": "people|john"}, "memory_key", "invalid_input"),
    ("NUL in the text", {**GOOD, "text": "Mina\x00 lives"}, "text", "invalid_input"),
]


def bad_facts(*skip: str) -> Any:
    """The cases as pytest parameters (`fields`, `field`, `code`), without those an interface cannot
    express."""
    return pytest.mark.parametrize(
        ("fields", "field", "code"),
        [pytest.param(f, n, c, id=name) for name, f, n, c in BAD_FACTS if name not in skip],
    )


BAD_SPACES: list[tuple[str, str]] = [
    ("a space that does not exist", "nowhere"),
    ("a space the being is not in", "family"),  # the tests create it without the writer
]
