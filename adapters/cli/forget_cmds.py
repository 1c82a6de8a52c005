"""`engram forget being NAME`: erasure that holds (crypto-shredding, ADR 0073)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import EXIT_CONFLICT, emit_json, fail_text
from engram.services.erasure import Forgotten


def _confirmed(question: str, yes: bool) -> bool:
    """`--yes` for scripts; on a terminal, ask; elsewhere, refuse (nothing destructive by default)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        fail_text("this erases for good: pass --yes to confirm when not on a terminal", EXIT_CONFLICT)
    return click.confirm(question, default=False, err=True)


def report(done: Forgotten, as_json: bool) -> None:
    """What a forget did: its message, counts and receipt (or the JSON), after any progress line."""
    if sys.stderr.isatty() and not as_json:
        click.echo("\r\x1b[K", err=True, nl=False)  # the progress line goes
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    click.echo(done.message)
    if done.counts:
        click.echo("  " + ", ".join(f"{k} {v}" for k, v in done.counts.items()))
    if done.position is not None:
        click.echo(f"  receipt {done.erasure_id} at position {done.position}")


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group("forget")
    def forget() -> None:
        """Erase for good (crypto-shredding): the key goes, and every view, vector and journal with it."""

    @forget.command("being")
    @click.argument("being_ref", metavar="NAME")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--by", default="cli", show_default=True, help="Who erases, for the receipt.")
    @command
    def forget_being(ctx: Any, being_ref: str, yes: bool, by: str, *, as_json: bool) -> None:
        """Erase being NAME: destroy its key, purge its views, vectors, full-text rows and journals, and
        append an `Erased` receipt (what, when, by whom, how much; never the content)."""
        if not _confirmed(f"Erase being {being_ref!r} and everything it remembers, for good?", yes):
            fail_text("nothing erased", EXIT_CONFLICT)
        live = sys.stderr.isatty() and not as_json

        def progress(view: str, position: int, head: int) -> None:
            if live:
                click.echo(f"\r\x1b[Kerasing, {view}: {position}/{head}", err=True, nl=False)

        report(ctx.engram.forgetting.forget_being(being_ref, by=by, progress=progress), as_json)
