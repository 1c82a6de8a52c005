"""Importing chat history from JSON lines (issue #10): `engram messages import BEING FILE.jsonl`.

One `{id, user, channel, role, text, at}` object per line (`urgent` and `priority` too). The lines
are taken in the order of their `at` (a stable sort; lines without `at` keep their order, after the
others), so that history forms the sessions live traffic would have formed (ADR 0052), in batches
of `MAX_BATCH_MESSAGES`, one transaction each. A line that is not a JSON object, or is not a valid
message, is refused naming its line number and field, and the rest goes on. Every message is taken
once per id, so an import run again takes nothing new (`duplicates`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from engram.domain.errors import InvalidInput
from engram.services.commands import MAX_BATCH_MESSAGES, MessageInput, invalid_input_of
from engram.services.messages import MessageCommands, check_input
from engram.services.note_import import Line


@dataclass
class MessageImportProgress:
    total: int
    read: int = 0
    taken: int = 0
    duplicates: int = 0
    refused: int = 0


@dataclass
class MessageImportReport:
    progress: MessageImportProgress
    refused_lines: list[dict[str, Any]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)

    @property
    def invalid(self) -> bool:
        """Whether a line was refused as invalid (not only for an id taken with other content)."""
        return any(r["code"] != "conflict" for r in self.refused_lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self.progress),
            "sessions": len(self.sessions),
            "refused_lines": sorted(self.refused_lines, key=lambda r: r["line"]),
        }


def _refused(number: int, code: str, field_name: str | None, message: str) -> dict[str, Any]:
    return {"line": number, "code": code, "field": field_name, "message": message}


def parse_line(line: Line, now: datetime) -> MessageInput:
    """The message of one line, or `InvalidInput` naming the field (`line` when it is not an object)."""
    try:
        obj = json.loads(line.text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not JSON ({exc.msg} at column {exc.colno})", field="line") from None
    if not isinstance(obj, dict):
        raise InvalidInput("a line is one JSON object {id, user, text, …}", field="line")
    try:
        item = MessageInput.model_validate(obj)
    except ValidationError as exc:
        refused = invalid_input_of(exc)
        first = refused.details["errors"][0]
        raise InvalidInput(first["message"], field=first["field"]) from None
    check_input(item, now)
    return item


def in_time_order(items: Sequence[tuple[Line, MessageInput]]) -> list[tuple[Line, MessageInput]]:
    """Stable by `at`; the lines without `at` after the others, in their order."""
    timed = sorted((p for p in items if p[1].at is not None), key=lambda p: p[1].at)  # type: ignore[arg-type,return-value]
    return [*timed, *(p for p in items if p[1].at is None)]


def import_messages(
    messages: MessageCommands,
    being_ref: str,
    lines: Sequence[Line],
    *,
    progress: Callable[[MessageImportProgress], None] | None = None,
    batch_size: int = MAX_BATCH_MESSAGES,
) -> MessageImportReport:
    """Take the messages of `lines` in time order, in batches; `progress` is called after each batch."""
    report = MessageImportReport(MessageImportProgress(total=len(lines)))
    counts = report.progress
    now = messages.clock.now()
    parsed: list[tuple[Line, MessageInput]] = []
    for line in lines:
        try:
            parsed.append((line, parse_line(line, now)))
        except InvalidInput as exc:
            report.refused_lines.append(
                _refused(line.number, exc.code, exc.details.get("field"), exc.message)
            )
            counts.refused += 1
    counts.read = counts.refused
    ordered = in_time_order(parsed)
    size = max(1, min(batch_size, MAX_BATCH_MESSAGES))
    for start in range(0, len(ordered), size):
        batch = ordered[start : start + size]
        taken = messages.take_many(being_ref, [item for _, item in batch], skip_refused=True)
        refused_at = {int(r["index"]): r for r in taken.refused}
        for r in taken.refused:
            line = batch[int(r["index"])][0]
            report.refused_lines.append(_refused(line.number, r["code"], r["field"], r["message"]))
        counts.refused += len(refused_at)
        for result in taken.messages:
            if result.duplicate:
                counts.duplicates += 1
            else:
                counts.taken += 1
            if result.session_id is not None:
                report.sessions.add(result.session_id)
        counts.read += len(batch)
        if progress is not None:
            progress(counts)
    return report
