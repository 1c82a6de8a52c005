"""Commands and their results, as pydantic models shared by every interface (CLI, HTTP, MCP, Python)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from engram.domain.note import MAX_IDEMPOTENCY_KEY_CHARS, MAX_SOURCE_REF_CHARS, NoteKind

MAX_BATCH_NOTES = 1000
"""Notes per batch command (one transaction). The CLI splits larger files into batches."""

BeingRef = Annotated[str, Field(min_length=1, max_length=100, description="A being's name or id.")]


class Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoteInput(Command):
    kind: NoteKind = NoteKind.SCENE
    text: str = Field(
        min_length=1, description="Raw text; for a scene, a JSON object (kept exactly as received)."
    )
    idempotency_key: str | None = Field(None, min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS)
    source_ref: str | None = Field(None, min_length=1, max_length=MAX_SOURCE_REF_CHARS)


class Result(BaseModel):
    model_config = ConfigDict(frozen=True)

    position: int | None = Field(
        None, description="Log position of the last event written; None when nothing was written."
    )


class BeingRegistered(Result):
    being_id: str
    name: str
    roots: dict[str, str]


class NoteTaken(Result):
    note_id: str
    being_id: str
    kind: str
    parsed: bool | None = Field(None, description="Scene notes: whether the text parsed as a scene.")
    parse_error: str | None = None
    duplicate: bool = Field(False, description="True when an idempotency key replayed an earlier note.")
    source_ref: str | None = None


class NotesTaken(Result):
    notes: list[NoteTaken]

    @property
    def failed(self) -> list[NoteTaken]:
        return [n for n in self.notes if n.parsed is False]


class Done(Result):
    details: dict[str, Any] = {}
