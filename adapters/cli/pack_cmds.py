"""`engram pack`: the context pack, the notes an agent puts in its prompt (spec 002, ADR 0049)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.services.pack import DEFAULT_PACK_LIMIT, MAX_PACK_LIMIT


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("pack")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--query", "-q", help="Rank the notes by this text (lexical + semantic) instead of recency."
    )
    @click.option(
        "--limit", default=DEFAULT_PACK_LIMIT, show_default=True, type=click.IntRange(1, MAX_PACK_LIMIT)
    )
    @command
    def pack(ctx: Any, being_ref: str, query: str | None, limit: int, *, as_json: bool) -> None:
        """BEING's context pack: its most recent live notes as `## Memory Context` and `[kind] text`
        blocks, ready for a prompt. Scenes (they are memories), sensitive, superseded, expired and
        disabled notes never enter it. Prints nothing when no note qualifies.

        With --query the notes are ranked by the query (the first such call embeds the notes that
        have no vector yet, recorded in the log). Reactivates nothing.
        """
        found = ctx.engram.packing.pack(being_ref, query=query, limit=limit)
        if as_json:
            emit_json(found.model_dump())
        elif found.text:
            click.echo(found.text)
