"""The lifecycle parameters of the MCP `note` and `note_scene` tools (spec 002, ADR 0046).

They go to `NoteInput` as given, so the tools refuse what the CLI, HTTP and Python refuse, naming the
field. `sensitive` is a flag: a sensitive note never comes back through MCP, so the model that wrote
it cannot read it again (only an admin token or the CLI sees it).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Stability = Annotated[
    str | None,
    Field(
        description="volatile (short-term: needs ttl_days) | stable (default) | permanent (never "
        "expires; a soul is permanent)."
    ),
]
TtlDays = Annotated[
    float | None, Field(description="Days the note lives, counted from `at`; then it leaves every read.")
]
Tags = Annotated[list[str] | None, Field(description="Up to 32 tags, to find the note by.")]
Evidence = Annotated[
    list[str] | None, Field(description="Why the note holds, e.g. what was seen; a rule needs one.")
]
Confidence = Annotated[float | None, Field(description="0 to 1 (default 1); a rule needs 0.8 or more.")]
Scope = Annotated[str | None, Field(description="Whose or what the note is about (default user).")]
Subject = Annotated[str | None, Field(description="What the note is about.")]
JobId = Annotated[str | None, Field(description="The job that wrote the note.")]
At = Annotated[
    str | None,
    Field(
        description="When it happened: ISO 8601 with a zone, e.g. 2026-05-02T10:00:00+00:00 (default now)."
    ),
]
Sensitive = Annotated[
    bool, Field(description="True: never put this note in a prompt or an answer (it is not shown again).")
]
