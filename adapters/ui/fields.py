"""Reading the explorer's query and form fields: a whole number within bounds, or a clear refusal."""

from __future__ import annotations

from collections.abc import Mapping

from engram.domain.errors import InvalidInput


def whole_number(
    values: Mapping[str, str], name: str, default: int, low: int = 0, high: int | None = None
) -> int:
    """`values[name]` as an int in [low, high]; `default` when absent or blank."""
    raw = values.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number") from None
    if value < low or (high is not None and value > high):
        raise InvalidInput(
            f"{name} is between {low} and {high}" if high is not None else f"{name} must be {low} or more"
        )
    return value
