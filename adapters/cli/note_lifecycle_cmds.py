"""`engram notes …`: a note's lifecycle (spec 002, ADRs 0046 and 0048): supersede, history, merge, the
expiry sweep and the maintenance merge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.notes_cmds import notes_group
from engram.adapters.cli.output import emit_json


def _line(link: Any) -> str:
    text = link.text if link.text is not None else "(sensitive: --include-sensitive shows it)"
    if len(text) > 100:
        text = text[:97] + "..."
    state = " [expired]" if link.expired else ""
    return f"{link.id}  [{link.kind}] {link.at[:19]}{state}  {text}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds the `notes` group to `cli`; `command` adds --json and error handling."""

    notes = notes_group(cli)

    @notes.command("supersede")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("old", metavar="OLD")
    @click.option("--by", "by", required=True, metavar="NEW", help="The note that replaces OLD.")
    @command
    def supersede(ctx: Any, being_ref: str, old: str, by: str, *, as_json: bool) -> None:
        """Mark note OLD superseded by note NEW (both BEING's). OLD then leaves every read but history."""
        done = ctx.engram.note_lifecycle.supersede(being_ref, old, by)
        if as_json:
            emit_json(done.model_dump())
        else:
            click.echo(f"note {done.old} superseded by {done.by}")

    @notes.command("history")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("note_id", metavar="ID")
    @click.option("--include-sensitive", is_flag=True, help="Show the text of sensitive notes too.")
    @command
    def history(ctx: Any, being_ref: str, note_id: str, include_sensitive: bool, *, as_json: bool) -> None:
        """A note's chain: what it replaced and what replaced it (a soul's history is its chain)."""
        chain = ctx.engram.note_lifecycle.history(being_ref, note_id, include_sensitive=include_sensitive)
        if as_json:
            emit_json(chain.model_dump())
            return
        for link in reversed(chain.replaced):
            click.echo(f"  replaced   {_line(link)}")
        click.echo(f"* this note  {_line(chain.note)}")
        for link in chain.replaced_by:
            click.echo(f"  replaced by {_line(link)}")
        if chain.cut:
            click.echo("(the chain is longer: cut)", err=True)

    @notes.command("merge")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("note_ids", metavar="ID ID…", nargs=-1, required=True)
    @click.option("--no-llm", is_flag=True, help="Join the texts; ask no LLM for a summary.")
    @command
    def merge(ctx: Any, being_ref: str, note_ids: tuple[str, ...], no_llm: bool, *, as_json: bool) -> None:
        """Merge two or more of BEING's notes into one summary note, which supersedes them."""
        done = ctx.engram.note_lifecycle.merge(being_ref, list(note_ids), use_llm=not no_llm)
        if as_json:
            emit_json(done.model_dump())
            return
        how = f"by {done.model}" if done.method == "llm" else "without an LLM"
        click.echo(f"merged {len(done.sources)} notes into summary {done.note_id} ({how})")
        if done.refused:
            click.echo(f"the LLM's summary was not used: {done.refused}", err=True)

    @notes.command("sweep")
    @command
    def sweep(ctx: Any, *, as_json: bool) -> None:
        """Record the expiry of every note past its expires_at, of every being (the worker does it
        every ENGRAM_NOTE_SWEEP_INTERVAL_S)."""
        e = ctx.engram
        e.views.ensure(names=["notes"])
        report = e.note_expiry.sweep()
        if as_json:
            emit_json(report.as_dict())
        else:
            click.echo(_count(report.expired, "note", "notes") + " expired")

    @notes.command("maintain")
    @click.argument("being_ref", metavar="BEING", required=False)
    @command
    def maintain(ctx: Any, being_ref: str | None, *, as_json: bool) -> None:
        """Merge volatile notes without ttl_days older than 7 days, 5 at a time of one being, scope and
        kind (of BEING, or of every being); the worker does it every ENGRAM_NOTE_MAINTENANCE_INTERVAL_S."""
        e = ctx.engram
        e.views.ensure(names=["notes"])
        report = e.note_maintenance.run(being_ref)
        if as_json:
            emit_json(report.as_dict())
            return
        summary = report.as_dict()
        merged = _count(summary["notes_merged"], "note", "notes")
        click.echo(f"{merged} merged into {_count(summary['merges'], 'summary', 'summaries')}")
        for failure in report.failed:
            click.echo(f"not merged ({failure['reason']}): {', '.join(failure['notes'])}", err=True)
