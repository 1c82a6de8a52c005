"""Importing scene notes from a file of JSON lines, safely re-runnable (ADR 0025).

Every line gets an idempotency key, so an import killed halfway and started again writes each line
once: a line's own `key` member if it has one, else one derived from the file's identity, the line's
content and how many identical lines came before it in the file. A line may carry its lifecycle
(spec 002) as members beside the scene's (`ttl_days`, `tags`, `at`, …; ADR 0047). Every line is
validated, lifecycle included, before any is written; then they are written in batches (one
transaction each), counting what was written, what was already there, and what was refused because
its key was used before for other content.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from engram.domain.errors import InvalidInput, InvalidScene
from engram.domain.note import MAX_IDEMPOTENCY_KEY_CHARS
from engram.domain.scene import parse_scene_text
from engram.services.commands import (
    LIFECYCLE_FIELDS,
    MAX_BATCH_NOTES,
    NoteInput,
    NoteTaken,
    invalid_input_of,
)
from engram.services.errors import IdempotencyConflict
from engram.services.notes import NoteCommands

IMPORT_BATCH = 500
KEY_MEMBER = "key"
"""A line's own idempotency key: `{"key": "msg-1042", "action": …}`. It is not part of the scene."""
LIFECYCLE_MEMBERS = LIFECYCLE_FIELDS
"""A line's lifecycle (spec 002), as `NoteInput` takes it: `{"action": …, "ttl_days": 30}`. Not part
of the scene either."""


@dataclass(frozen=True)
class Line:
    number: int
    text: str


@dataclass
class ImportProgress:
    total: int
    read: int = 0
    written: int = 0
    already_there: int = 0
    refused: int = 0
    failed_to_parse: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class ImportReport:
    progress: ImportProgress
    notes: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    failed_to_parse: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.progress.as_dict(),
            "noted": len(self.notes),  # every line now in the log, written by this run or an earlier one
            "notes": self.notes,
            "refused_lines": self.refused,
            "failed_to_parse_lines": self.failed_to_parse,
        }


def line_key(source: str, text: str, occurrence: int) -> str:
    """The key of a line without its own: the file's identity, the line's content, and which of the
    identical lines of that file it is (1 for the first). Stable when lines are added anywhere."""
    file_id = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    content = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    return f"file:{file_id}:{content}:{occurrence}"


def prepare(
    source: str, lines: Sequence[Line], source_ref: str | None, received_at: datetime | None = None
) -> list[NoteInput]:
    """One keyed note per line, or `InvalidScene` listing the problems of every bad line (nothing is
    written then: a bad line 9,000 must not leave the file half imported). With `received_at`, each
    line's lifecycle is checked against spec 002's rules as its intake will check it."""
    problems: list[dict[str, Any]] = []
    seen: Counter[str] = Counter()
    items: list[NoteInput] = []
    for line in lines:
        try:
            text, key, members = _split(line.text)
            if key is None:
                # The whole line, members and all: the same line keeps its key, and a line that
                # changed its TTL or tags is another line (ADR 0047).
                seen[line.text] += 1
                key = line_key(source, line.text, seen[line.text])
            parse_scene_text(text)
            item = NoteInput(text=text, idempotency_key=key, source_ref=source_ref, **members)
            if received_at is not None:
                item.lifecycle(received_at)
            items.append(item)
        except InvalidScene as exc:
            problems.extend(
                {"field": f"line {line.number}: {e['field']}", "message": e["message"]} for e in exc.errors
            )
        except ValidationError as exc:
            problems.extend(
                {"field": f"line {line.number}: {e['field']}", "message": e["message"]}
                for e in invalid_input_of(exc).details["errors"]
            )
        except InvalidInput as exc:
            field = exc.details.get("field")
            where = f"line {line.number}: {field}" if field else f"line {line.number}"
            problems.append({"field": where, "message": exc.message})
    if problems:
        raise InvalidScene(f"{len(problems)} problem(s) in the file; nothing was imported", problems[:50])
    return items


def _split(text: str) -> tuple[str, str | None, dict[str, Any]]:
    """A line's scene, its own key and its lifecycle members (`LIFECYCLE_MEMBERS`). A line with none
    of them is its own text, byte for byte; otherwise the scene is the object without them."""
    if not any(f'"{m}"' in text for m in (KEY_MEMBER, *LIFECYCLE_MEMBERS)):
        return text, None, {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return text, None, {}
    if not isinstance(obj, dict) or not {KEY_MEMBER, *LIFECYCLE_MEMBERS} & obj.keys():
        return text, None, {}
    key = None
    if KEY_MEMBER in obj:
        key = obj.pop(KEY_MEMBER)
        if not isinstance(key, str) or not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
            raise InvalidInput(f"`key` is a string of 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters")
    members = {m: obj.pop(m) for m in LIFECYCLE_MEMBERS if m in obj}
    return json.dumps(obj, ensure_ascii=False), key, members


def import_lines(
    notes: NoteCommands,
    being_ref: str,
    source: str,
    lines: Sequence[Line],
    *,
    source_ref: str | None = None,
    progress: Callable[[ImportProgress], None] | None = None,
    batch_size: int = IMPORT_BATCH,
) -> ImportReport:
    """Validate every line, then write them in batches; `progress` is called after each batch.

    `source` identifies the file (its resolved path): the same file imported again writes nothing
    twice. A line whose key was used before with other content is refused and the rest goes on.
    """
    items = prepare(source, lines, source_ref, notes.clock.now())
    report = ImportReport(ImportProgress(total=len(lines)))
    counts = report.progress
    size = max(1, min(batch_size, MAX_BATCH_NOTES))
    for start in range(0, len(items), size):
        batch = list(zip(lines[start : start + size], items[start : start + size], strict=True))
        counts.read += len(batch)
        for line, taken in _take(notes, being_ref, batch, report):
            entry = taken.model_dump()
            report.notes.append(entry)
            if taken.duplicate:
                counts.already_there += 1
            else:
                counts.written += 1
            if taken.parsed is False:
                counts.failed_to_parse += 1
                report.failed_to_parse.append({"line": line.number, "reason": taken.parse_error})
        if progress is not None:
            progress(counts)
    return report


def _take(
    notes: NoteCommands, being_ref: str, batch: list[tuple[Line, NoteInput]], report: ImportReport
) -> list[tuple[Line, NoteTaken]]:
    """One transaction for the batch; a line refused for its key leaves the batch, which is retried."""
    while batch:
        try:
            taken = notes.take_many(being_ref, [item for _, item in batch])
        except IdempotencyConflict as exc:
            index = int(exc.details.get("index", 0))
            line, _ = batch.pop(index)
            report.refused.append({"line": line.number, "reason": exc.message})
            report.progress.refused += 1
            continue
        return list(zip([line for line, _ in batch], taken.notes, strict=True))
    return []
