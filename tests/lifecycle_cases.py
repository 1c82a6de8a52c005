"""Lifecycle inputs every interface refuses the same way (ADR 0046): each case's note fields (as
`NoteInput` takes them) and the field the `invalid_input` must name."""

from __future__ import annotations

from typing import Any

import pytest

BAD_LIFECYCLES: list[tuple[str, dict[str, Any], str]] = [
    ("volatile without ttl", {"kind": "log", "stability": "volatile"}, "ttl_days"),
    ("permanent with ttl", {"kind": "knowledge", "stability": "permanent", "ttl_days": 3}, "ttl_days"),
    ("stable soul", {"kind": "soul", "stability": "stable"}, "stability"),
    ("rule without evidence", {"kind": "rule"}, "evidence"),
    ("rule at 0.5", {"kind": "rule", "evidence": ["seen twice"], "confidence": 0.5}, "confidence"),
    ("ttl 0", {"kind": "log", "ttl_days": 0}, "ttl_days"),
    ("ttl 40,000 days", {"kind": "log", "ttl_days": 40_000}, "ttl_days"),
    ("33 tags", {"kind": "todo", "tags": [f"t{i}" for i in range(33)]}, "tags"),
    ("evidence of 1,001 characters", {"kind": "knowledge", "evidence": ["e" * 1001]}, "evidence"),
    ("unknown stability", {"kind": "todo", "stability": "forever"}, "stability"),
    ("unknown sensitivity", {"kind": "todo", "sensitivity": "secret"}, "sensitivity"),
    ("at without a zone", {"kind": "log", "at": "2026-05-02T10:00:00"}, "at"),
    ("at in the future", {"kind": "log", "at": "2099-01-01T00:00:00+00:00"}, "at"),
]


def bad_lifecycles(*skip: str) -> Any:
    """The cases as pytest parameters (`fields`, `field`), without those an interface cannot express."""
    return pytest.mark.parametrize(
        ("fields", "field"),
        [pytest.param(f, n, id=name) for name, f, n in BAD_LIFECYCLES if name not in skip],
    )


def names_field(field: str, named: list[str]) -> bool:
    """Whether one of the error's fields (`ttl_days`, `body.ttl_days`, `evidence.0`, …) is `field`."""
    parts = [p for n in named for p in n.replace(":", ".").replace(" ", "").split(".")]
    return field in parts
