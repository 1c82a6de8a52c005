"""`engram journal refresh | show | memory BEING`: a being's daily journals and MEMORY.md (ADR 0054)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.group("journal")
    def journal() -> None:
        """A being's daily journals and MEMORY.md: refresh the files, print a day or MEMORY.md."""

    @journal.command("refresh")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--full", is_flag=True, help="Rewrite every file, not only the days with new messages.")
    @command
    def journal_refresh(ctx: Any, being_ref: str, full: bool, *, as_json: bool) -> None:
        """Write BEING's journals now (the worker does it every ENGRAM_JOURNAL_INTERVAL_S)."""
        done = ctx.engram.journals.refresh(being_ref, full=full)
        if as_json:
            emit_json(done.model_dump())
            return
        where = ctx.engram.journals.location(done.folder)
        if not done.days and not done.memory:
            click.echo(f"{done.being}'s journals are up to date ({where})")
            return
        count = f"{len(done.days)} day{'s' if len(done.days) != 1 else ''}"
        span = (
            f" ({done.days[0]}" + (f" to {done.days[-1]})" if len(done.days) > 1 else ")")
            if done.days
            else ""
        )
        verb = "rewrote" if done.full else "wrote"
        click.echo(f"{verb} {done.being}'s journals: {count}{span} and MEMORY.md in {where}")

    @journal.command("show")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--date", "day", default=None, help="The day, YYYY-MM-DD (UTC); default the latest.")
    @command
    def journal_show(ctx: Any, being_ref: str, day: str | None, *, as_json: bool) -> None:
        """Print BEING's journal of a day, rendered from the log's view (the file holds the same once
        refreshed)."""
        found, text = ctx.engram.journals.day_text(being_ref, day)
        if as_json:
            emit_json({"date": found, "markdown": text})
        else:
            click.echo(text, nl=False)

    @journal.command("memory")
    @click.argument("being_ref", metavar="BEING")
    @command
    def journal_memory(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """Print BEING's MEMORY.md, rendered from the log's view."""
        text = ctx.engram.journals.memory_text(being_ref)
        if as_json:
            emit_json({"markdown": text})
        else:
            click.echo(text, nl=False)
