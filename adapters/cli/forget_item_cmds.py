"""`engram forget subject BEING --user U` and `engram forget note|message|fact ID` (ADR 0075, 0076),
added to the `forget` group of `forget_cmds.py`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.forget_cmds import _confirmed, report
from engram.adapters.cli.output import EXIT_CONFLICT, fail_text
from engram.services.beings import resolve_being


def _progress(as_json: bool) -> Callable[[str, int, int], None]:
    live = sys.stderr.isatty() and not as_json

    def progress(view: str, position: int, head: int) -> None:
        if live:
            click.echo(f"\r\x1b[Krebuilding {view}: {position}/{head}", err=True, nl=False)

    return progress


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    forget = cli.commands["forget"]
    assert isinstance(forget, click.Group)  # registered by forget_cmds first

    @forget.command("subject")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--user", "user", required=True, help="The user whose words the being forgets.")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--by", default="cli", show_default=True, help="Who erases, for the receipt.")
    @command
    def forget_subject(ctx: Any, being_ref: str, user: str, yes: bool, by: str, *, as_json: bool) -> None:
        """Erase everything of user U in BEING: their messages and the being's answers to them, their
        sessions and summaries, the facts about them, and what was extracted or made from those."""
        if not _confirmed(f"Erase everything of user {user!r} in {being_ref!r}, for good?", yes):
            fail_text("nothing erased", EXIT_CONFLICT)
        done = ctx.engram.item_forgetting.forget_subject(being_ref, user, by=by, progress=_progress(as_json))
        report(done, as_json)

    for kind in ("note", "message", "fact"):
        _item_command(forget, command, kind)


OWN_IDS = {"note": "the idempotency key you gave it", "message": "the --id you gave it"}


def _item_command(forget: click.Group, command: Callable[[Any], Any], kind: str) -> None:
    own = OWN_IDS.get(kind)
    about = f" ID: its id, or, with --being, {own}." if own else " ID: its id."

    @forget.command(kind, help=f"Erase one {kind} (its key is destroyed) and what was made from it.{about}")
    @click.argument("item_id", metavar="ID")
    @click.option(
        "--being",
        "being_ref",
        default=None,
        help="The being whose item it is: only its items are forgotten"
        + (f", and ID may be {own}." if own else "."),
    )
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--by", default="cli", show_default=True, help="Who erases, for the receipt.")
    @command
    def forget_item(
        ctx: Any, item_id: str, being_ref: str | None, yes: bool, by: str, *, as_json: bool
    ) -> None:
        being = resolve_being(ctx.engram.store, being_ref).id if being_ref is not None else None
        if not _confirmed(f"Erase {kind} {item_id}, for good?", yes):
            fail_text("nothing erased", EXIT_CONFLICT)
        done = ctx.engram.item_forgetting.forget_item(
            kind, item_id, by=by, being=being, progress=_progress(as_json)
        )
        report(done, as_json)
