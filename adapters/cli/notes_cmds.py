"""`engram notes list BEING`: a being's notes as they stand, newest first (spec 002, ADR 0047)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.domain.note import NoteKind
from engram.services.note_list import DEFAULT_NOTE_LIST, MAX_NOTE_LIST, NoteListed, NoteState

TEXT_WIDTH = 120  # a note's text on one line, cut beyond this


def notes_group(cli: click.Group) -> click.Group:
    """The `notes` group, made by the first module that registers a command in it (this one's `list`,
    `note_lifecycle_cmds`' supersede, history, merge, sweep and maintain)."""
    found = cli.commands.get("notes")
    if isinstance(found, click.Group):
        return found

    @cli.group("notes")
    def notes() -> None:
        """List and manage a being's notes: list, supersede, history, merge, expiry."""

    return notes


def note_line(note: NoteListed) -> str:
    """`2026-11-01 09:00  [todo] Call Mina  #errand  expires 2026-11-08 09:00  (id)`, with the state
    when it is not active."""
    text = " ".join(note.text.split())
    if len(text) > TEXT_WIDTH:
        text = text[: TEXT_WIDTH - 1] + "…"
    parts = [f"{note.at[:16].replace('T', ' ')}  [{note.kind}] {text}"]
    if note.tags:
        parts.append(" ".join(f"#{t}" for t in note.tags))
    if note.expires_at is not None:
        verb = "expired" if note.state == NoteState.EXPIRED else "expires"
        parts.append(f"{verb} {note.expires_at[:16].replace('T', ' ')}")
    if note.sensitivity != "normal":
        parts.append(note.sensitivity)
    if note.state == NoteState.SUPERSEDED:
        parts.append(f"superseded by {note.superseded_by}")
    elif note.state == NoteState.EXPIRED:
        parts.append("[expired]")
    return "  ".join(parts) + f"  ({note.id})"


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""
    notes = notes_group(cli)

    @notes.command("list")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--kind", "kinds", multiple=True, type=click.Choice([k.value for k in NoteKind]))
    @click.option("--scope", default=None, help="Only notes of this scope (e.g. user).")
    @click.option("--tag", "tags", multiple=True, help="Only notes with one of these tags (repeatable).")
    @click.option(
        "--limit", default=DEFAULT_NOTE_LIST, show_default=True, type=click.IntRange(1, MAX_NOTE_LIST)
    )
    @click.option(
        "--all", "include_inactive", is_flag=True, help="Also expired and superseded notes, marked so."
    )
    @click.option("--include-sensitive", is_flag=True, help="Also sensitive notes.")
    @command
    def notes_list(
        ctx: Any,
        being_ref: str,
        kinds: tuple[str, ...],
        scope: str | None,
        tags: tuple[str, ...],
        limit: int,
        include_inactive: bool,
        include_sensitive: bool,
        *,
        as_json: bool,
    ) -> None:
        """BEING's notes, newest first: active ones (neither expired nor superseded) that are not
        sensitive, unless --all and --include-sensitive say otherwise."""
        found = ctx.engram.listing.notes(
            being_ref,
            kinds=list(kinds),
            scope=scope,
            tags=list(tags),
            limit=limit,
            include_inactive=include_inactive,
            include_sensitive=include_sensitive,
        )
        if as_json:
            emit_json([n.model_dump(mode="json") for n in found])
            return
        if not found:
            click.echo("no notes", err=True)
        for n in found:
            click.echo(note_line(n))
