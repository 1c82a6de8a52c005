"""Request and response bodies of the HTTP API that the services do not already define."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from engram.domain.being import MAX_NAME_CHARS, MAX_SOUL_CHARS
from engram.domain.token import MAX_LABEL_CHARS
from engram.services.commands import MAX_BATCH_NOTES, NoteInput
from engram.services.note_lifecycle import MAX_MERGE_NOTES
from engram.services.reading import MAX_QUERY_CHARS, MAX_QUERY_K


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ViewProblem(BaseModel):
    """A view that stopped, or holds some beings' events back (`engram projections status` says more)."""

    view: str
    last_error: str | None = Field(
        None, description="The kind of error that stopped the view (e.g. `DataError`), never its text."
    )
    since: str | None = Field(None, description="When the view first failed (ISO 8601, UTC).")
    position: int = Field(description="The log position the view reached.")
    held_beings: int = Field(0, description="How many beings' events the view holds back (never which).")
    held_since: str | None = Field(None, description="When the oldest of those holds began.")


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(
        description="`degraded`: some view stopped or holds events back."
    )
    version: str
    warnings: list[str] = Field(
        default_factory=list,
        description="Problems that do not stop the server but need an operator, e.g. a changed embedder "
        "whose new vectors cannot find the old ones.",
    )
    views: list[ViewProblem] = Field(default_factory=list, description="The views with a problem.")


class BeingCreate(Body):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="Unique, case-sensitive.")
    soul: str | None = Field(None, max_length=MAX_SOUL_CHARS, description="The persona text.")


class BeingSummary(BaseModel):
    id: str
    name: str
    cycle: int
    roots: dict[str, str]
    registered_at: str
    last_cycle_at: str | None


class SoulIn(Body):
    soul: str = Field(max_length=MAX_SOUL_CHARS)


class NoteBatch(Body):
    notes: list[NoteInput] = Field(min_length=1, max_length=MAX_BATCH_NOTES)


class NotePatch(Body):
    read: bool | None = Field(None, description="Mark the note read (true) or unread (false).")
    enabled: bool | None = Field(None, description="Enable or disable the note (rules, preferences, …).")


class ClusterRow(BaseModel):
    id: str
    name: str
    parent_id: str
    is_root: bool
    active_count: int
    total_count: int
    created_at: str


class PatrolRunRow(BaseModel):
    id: str
    cycle: int
    llm: str | None
    started_at: str
    finished_at: str | None
    steps: dict[str, Any]
    decisions: int
    rejected: int


class RecallIn(Body):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)


class QueryIn(Body):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(10, ge=1, le=MAX_QUERY_K)
    profile: str = Field("default", max_length=40, description="default, spec-001, semantic or lexical.")
    include_dead: bool = False
    reactivate: bool = Field(True, description="False: an auditor's read that leaves the nodes as they are.")
    links: bool | None = Field(
        None,
        description="Follow the links dreaming found one hop from the top 3 hits (default: the server's setting).",
    )


class SearchMode(StrEnum):
    OR = "or"
    AND = "and"


class PatrolIn(Body):
    dry_run: bool = Field(
        False,
        description="Show what would change, write nothing, ask no LLM. The `notes_to_nodes` step then "
        "lists in `would_create` the node each pending scene note would become: `note_id`, `action`, "
        "`cluster_id`, `cluster` (name), `placed_by` (`similarity` with its `similarity`, or `keywords` "
        "for a root, with `llm_decides` when a real patrol asks the LLM for the root).",
    )


class LlmProvider(StrEnum):
    AUTO = "auto"
    ANTHROPIC = "anthropic"
    OPENAI = "openai"


class PatrolOut(BaseModel):
    being_id: str
    being: str
    cycle: int
    dry_run: bool
    llm: str | None = Field(description="provider:model of the LLM used, or null (mechanical steps only).")
    resumed: bool
    steps: list[dict[str, Any]]


class HistoryEvent(BaseModel):
    version: int
    timestamp: str | None = Field(
        description="Null for an event whose content was erased: its time went with it."
    )
    type: str
    payload: dict[str, Any]


class LogEntry(BaseModel):
    position: int
    kind: str | None
    aggregate_id: str
    version: int
    timestamp: str | None = Field(
        description="Null for an event whose content was erased: its time went with it."
    )
    type: str
    being_id: str | None
    payload: dict[str, Any]


class ItemKind(StrEnum):
    NOTES = "notes"
    NODES = "nodes"
    CLUSTERS = "clusters"
    PATROL_RUNS = "patrol-runs"

    @property
    def audit_kind(self) -> str:
        return {"notes": "note", "nodes": "node", "clusters": "cluster", "patrol-runs": "patrol-run"}[
            self.value
        ]


class HeldBeing(BaseModel):
    """A being whose events a view holds back since one of them could not be applied (ADR 0031)."""

    being: str = Field(description="The being's id.")
    position: int = Field(description="The log position of the event that could not be applied.")
    event_key: str | None
    event_type: str | None
    error: str
    since: str
    attempts: int
    retry_at: float = Field(description="When the worker tries again (Unix time).")


class ProjectionStatus(BaseModel):
    name: str
    generation: int
    position: int
    head: int
    lag: int
    schema_version: int
    code_schema_version: int
    needs_rebuild: bool
    last_error: str | None
    last_error_at: str | None
    error_since: str | None = None
    building: dict[str, int]
    holds: list[HeldBeing] = Field(default_factory=list)


class Rebuilt(BaseModel):
    projection: str
    generation: int


class TokenCreate(Body):
    being: str | None = Field(None, min_length=1, max_length=100, description="The being's name or id.")
    admin: bool = Field(False, description="An admin token instead of a being token.")
    label: str = Field("", max_length=MAX_LABEL_CHARS)


# -- a note's lifecycle (ADR 0048) ---------------------------------------------------------------


class SupersedeIn(Body):
    by: UUID = Field(description="The note that replaces this one (a note of the same being).")


class MergeIn(Body):
    ids: list[UUID] = Field(min_length=2, max_length=MAX_MERGE_NOTES, description="The notes to merge.")
    llm: bool = Field(True, description="false: join the texts; ask no LLM for a summary.")
