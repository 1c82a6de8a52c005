"""The lifecycle options of `engram note` (spec 002, ADR 0046): what `NoteInput` takes beside the text.

Values go to `NoteInput` as given, so the CLI refuses what HTTP, MCP and Python refuse, with the same
`invalid_input` naming the field (an unknown stability, `--at` without a zone, …).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

OPTIONS = (
    click.option("--stability", help="volatile (needs --ttl-days) | stable (default) | permanent."),
    click.option("--ttl-days", type=float, help="Days the note lives, counted from --at (or now)."),
    click.option("--sensitive", is_flag=True, help="Never put this note in a prompt, pack or recall."),
    click.option("--confidence", type=float, help="0 to 1 (default 1); a rule needs 0.8 or more."),
    click.option("--evidence", multiple=True, help="Why the note holds (repeatable); a rule needs one."),
    click.option("--tag", "tags", multiple=True, help="A tag (repeatable): `engram notes list --tag`."),
    click.option("--scope", help="Whose or what the note is about (default user)."),
    click.option("--subject", help="What the note is about."),
    click.option("--job-id", help="The job that wrote the note."),
    click.option("--at", help="When it happened, ISO 8601 with a zone (default now)."),
)


def lifecycle_options(fn: F) -> F:
    for option in reversed(OPTIONS):
        fn = option(fn)
    return fn
