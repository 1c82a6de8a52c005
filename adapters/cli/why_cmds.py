"""`engram why KIND ID --being BEING`: a memory's lineage as a tree (issue #13, ADR 0068)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.services.lineage import WHY_KINDS, why_text


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's command to `cli`; `command` adds --json and error handling."""

    @cli.command("why")
    @click.argument("kind", type=click.Choice(WHY_KINDS))
    @click.argument("ref", metavar="ID")
    @click.option("--being", "being_ref", required=True, help="The being whose memory it is.")
    @command
    def why(ctx: Any, kind: str, ref: str, being_ref: str, *, as_json: bool) -> None:
        """Why a memory is as it is: its sources, every decision that touched it (model, prompt
        version, the verbatim answer), merges, deaths, supersedes, each with its log position."""
        report = ctx.engram.why.why(being_ref, kind, ref)
        if as_json:
            emit_json(report)
        else:
            click.echo(why_text(report))
