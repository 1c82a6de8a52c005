"""Text that every store keeps: the one rule for what a string may hold, wherever it enters.

Two characters are refused, in every field of every input, on every backend alike (ADR 0029):

- NUL (U+0000): JSON, Python and SQLite accept it, but PostgreSQL `text` and `jsonb` do not. Let in,
  it stops the views that copy the field on PostgreSQL, for every being of the deployment.
- a lone UTF-16 surrogate (U+D800–U+DFFF): what a JSON escape such as `"\\ud800"` without its pair
  decodes to. It has no UTF-8 encoding, so neither the log's JSON nor SQLite nor PostgreSQL can
  store it.

Every other character is accepted and comes back as it was given: the other control characters,
noncharacters such as U+FFFF, astral-plane characters (tests/integration/test_unstorable_text.py
checks this on both backends).

`text_problem` is the rule; `check_text` raises `InvalidInput` naming the field; `text_problems` finds
every offending string (and mapping key) inside a nested JSON value, with its path; `STORABLE` and
`StorableText` are the rule for pydantic request models.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from engram.domain.errors import InvalidInput

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None when it can."""
    if text.isascii() and "\x00" not in text:  # nearly all text: no surrogate can be in ASCII
        return None
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain the NUL character (\\u0000)"
    return f"must not contain a lone UTF-16 surrogate (\\u{ord(found.group()):04x})"


def escaped(text: str) -> str:
    """`text` with the characters it must not hold written as `\\uXXXX`, safe to show and to store."""
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def check_text(field: str, text: str) -> str:
    """`text`, or `InvalidInput` naming `field` when a store could not keep it."""
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field=field)
    return text


def text_problems(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, problem) of every string inside a JSON-like value that a store could not keep.

    Paths are dotted, as validation errors name fields: `actors.1`, `emotion.valence`; a mapping key
    that is itself the problem is named by its path (shown escaped).
    """
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield path, problem
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{escaped(str(key))}" if path else escaped(str(key))
            if isinstance(key, str) and (problem := text_problem(key)) is not None:
                yield where, f"the name of this field {problem}"
            yield from text_problems(item, where)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from text_problems(item, f"{path}.{i}" if path else str(i))


def storable(value: Any) -> Any:
    """The values of a JSON-like structure with every unstorable character replaced by U+FFFD, so
    that the rest of it can still be validated (and every other problem listed)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def recordable(value: Any) -> Any:
    """A JSON-like structure with every unstorable character written as `\\uXXXX` (`escaped`): what an
    outside party said (an LLM's answer, the plan parsed from it) is recorded, visibly, rather than
    refused by the log."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, dict):
        return {recordable(k): recordable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [recordable(v) for v in value]
    return value


def _storable_text(value: Any) -> Any:
    if isinstance(value, str) and (problem := text_problem(value)) is not None:
        raise PydanticCustomError("unstorable_text", "Text " + problem)
    return value


STORABLE = BeforeValidator(_storable_text)
"""The rule as pydantic metadata, for request models (`NoteInput`): refuses what `text_problem`
refuses, with its reason, before pydantic's own check of a lone surrogate ("unable to parse raw
data as a unicode string") can say it less clearly. Put it after a `Field`'s constraints:
`Annotated[str | None, Field(max_length=200), STORABLE]`."""

StorableText = Annotated[str, STORABLE]
