"""What `engram notes list` shows (`Listing.notes`): a being's notes as they stand (spec 002, ADR 0047).

By default only the notes a prompt could use: neither superseded nor expired (compared with now, not
waiting for the worker's `Note.Expired`), and not sensitive. `include_inactive` shows every state,
each row saying which; `include_sensitive` is for the CLI and admin tokens only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.note import MAX_LABEL_CHARS, MAX_TAG_CHARS, MAX_TAGS
from engram.domain.text import check_text

DEFAULT_NOTE_LIST = 50
MAX_NOTE_LIST = 1000


class NoteState(StrEnum):
    ACTIVE = "active"
    EXPIRED = "expired"  # past its expires_at, whether or not the worker recorded it yet
    SUPERSEDED = "superseded"  # by `superseded_by` (a manual supersede, a newer soul, a merge)


class NoteListed(BaseModel):
    """One note of a list, with its lifecycle and the state it is in now."""

    id: str
    kind: str
    text: str
    state: NoteState
    at: str = Field(description="When the note's event happened (ISO 8601, UTC); lists are newest first.")
    expires_at: str | None = Field(description="When it expires (ISO 8601, UTC); None: never.")
    stability: str
    ttl_days: float | None
    sensitivity: str
    confidence: float
    evidence: list[str]
    tags: list[str]
    scope: str
    subject: str | None
    job_id: str | None
    superseded_by: str | None
    superseded_reason: str | None
    merged_from: list[str]
    read: bool
    enabled: bool
    parse_status: str
    parse_error: str | None
    idempotency_key: str | None
    source_ref: str | None
    node_id: str | None
    created_at: str

    @classmethod
    def of(cls, row: dict[str, Any], now: str) -> NoteListed:
        if row["superseded_by"] is not None:
            state = NoteState.SUPERSEDED
        elif row["expires_at"] is not None and row["expires_at"] <= now:
            state = NoteState.EXPIRED
        else:
            state = NoteState.ACTIVE
        fields = {k: v for k, v in row.items() if k in cls.model_fields}
        ids = ("id", "superseded_by", "node_id")
        fields.update({k: str(row[k]) if row[k] is not None else None for k in ids})
        return cls(
            **fields,
            state=state,
            evidence=json.loads(row["evidence_json"] or "[]"),
            tags=json.loads(row["tags_json"] or "[]"),
            merged_from=json.loads(row["merged_from_json"] or "[]"),
        )


def filter_tags(tags: Sequence[str]) -> list[str]:
    """Trimmed like a note's own tags (ADR 0046), so `--tag " garden"` finds the notes tagged garden."""
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"give at most {MAX_TAGS} tags, got {len(tags)}", field="tag")
    clean: list[str] = []
    for tag in tags:
        check_text("tag", tag)
        tag = tag.strip()
        if not 0 < len(tag) <= MAX_TAG_CHARS:
            raise InvalidInput(f"a tag has 1 to {MAX_TAG_CHARS} characters", field="tag")
        if tag not in clean:
            clean.append(tag)
    return clean


def check_scope(scope: str | None) -> None:
    if scope is not None:
        check_text("scope", scope)
        if not 0 < len(scope) <= MAX_LABEL_CHARS:
            raise InvalidInput(f"scope has 1 to {MAX_LABEL_CHARS} characters", field="scope")
