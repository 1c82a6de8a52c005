"""`engram message`, `engram messages import` and `engram messages search` (issue #10, ADR 0052/0055)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from engram.adapters.cli.output import EXIT_CONFLICT, EXIT_INVALID, emit_json
from engram.domain.errors import InvalidInput
from engram.services.commands import MessageInput
from engram.services.conversation_summaries import SummaryReport
from engram.services.message_import import MessageImportProgress, import_messages
from engram.services.message_search import DEFAULT_MESSAGE_HITS, MAX_MESSAGE_HITS


def messages_group(cli: click.Group) -> click.Group:
    """The `messages` group, made by the first module that registers a command in it."""
    found = cli.commands.get("messages")
    if isinstance(found, click.Group):
        return found

    @cli.group("messages")
    def messages() -> None:
        """Import and search a being's chat messages."""

    return messages


def _progress(label: str) -> Callable[[MessageImportProgress], None]:
    """Progress on stderr: one line rewritten in place on a terminal, one line per batch elsewhere."""
    live = sys.stderr.isatty()

    def show(p: MessageImportProgress) -> None:
        text = (
            f"{label}: {p.read}/{p.total} lines, taken {p.taken}, duplicates {p.duplicates}, "
            f"refused {p.refused}"
        )
        click.echo(f"\r{text}" if live else text, err=True, nl=not live or p.read >= p.total)

    return show


def _when(at: str) -> str:
    return datetime.fromisoformat(at).strftime("%Y-%m-%d %H:%M")


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("message")
    @click.argument("being_ref", metavar="BEING")
    # --user, --id and --text are checked with the rest of the message (an invalid_input naming
    # the field, as every interface refuses a message without them), not by click.
    @click.option("--user", default=None, help="Who the conversation is with (required).")
    @click.option("--id", "message_id", default=None, help="Your message id: taken once per id (required).")
    @click.option("--text", default=None, help="The message, kept verbatim (required).")
    @click.option("--channel", default=None, help="Where it was said (e.g. telegram).")
    @click.option("--role", default="user", show_default=True, help="user or assistant (the being's answer).")
    @click.option("--at", default=None, help="When it was said, ISO 8601 with a zone (default: now).")
    @click.option("--urgent", is_flag=True, help="Mark it urgent.")
    @click.option("--priority", type=int, default=None, help="0 to 10.")
    @command
    def message(
        ctx: Any,
        being_ref: str,
        user: str | None,
        message_id: str | None,
        text: str | None,
        channel: str | None,
        role: str,
        at: str | None,
        urgent: bool,
        priority: int | None,
        *,
        as_json: bool,
    ) -> None:
        """Hand BEING one chat message. The same --id again takes nothing new (`duplicate`); the same
        --id with other content is refused (exit 4)."""
        given = {"id": message_id, "user": user, "text": text, "channel": channel, "at": at}
        item = MessageInput.model_validate(
            {
                **{k: v for k, v in given.items() if v is not None},
                "role": role,
                "urgent": urgent,
                "priority": priority,
            }
        )
        taken = ctx.engram.messages.take(being_ref, item)
        if as_json:
            emit_json(taken.model_dump())
            return
        where = f"session {taken.session_id}" if taken.session_id else "no session (a late message)"
        dup = " (already taken with this id)" if taken.duplicate else ""
        click.echo(f"took message {taken.id} #{taken.number} from {taken.user}, {where}{dup}")

    messages = messages_group(cli)

    @messages.command("import")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("path", metavar="FILE.jsonl", type=click.Path(path_type=Path, dir_okay=False))
    @click.option(
        "--no-summaries",
        is_flag=True,
        help="Leave the sessions' summaries to the worker (default: written before the command ends).",
    )
    @command
    def messages_import(ctx: Any, being_ref: str, path: Path, *, no_summaries: bool, as_json: bool) -> None:
        """Import chat history: one {id, user, channel, role, text, at} object per line (also urgent,
        priority). Lines are taken in the order of their `at`, so that the sessions come out as live
        traffic would have made them. A bad line is refused naming its number and field, and the rest
        goes on; running the import again takes nothing new. Then the summaries that are due are
        written (closed sessions, the open session's rolling summary, spines; with the LLM when one is
        configured), unless --no-summaries. Exit 2 when a line was invalid, 4 when a line's id was
        taken before with other content."""
        from engram.adapters.cli.main import _read_lines  # the CLI's reader of JSON-lines files

        lines = _read_lines(path)
        if not lines:
            raise InvalidInput(f"{path} holds no messages")
        report = import_messages(
            ctx.engram.messages, being_ref, lines, progress=_progress(f"importing {path.name}")
        )
        counts = report.progress
        summaries = None
        if counts.taken and not no_summaries:

            def summarising(r: SummaryReport) -> None:
                if not as_json and sys.stderr.isatty():
                    click.echo(
                        f"\rsummarising: {r.sessions} sessions, {r.rolling} rolling, {r.spines} spines",
                        nl=False,
                        err=True,
                    )

            summaries = ctx.engram.summaries.run_until_done(being_ref, progress=summarising)
            if not as_json and sys.stderr.isatty():
                click.echo("", err=True)
        # Facts too, with an LLM (ADR 0058); without one the worker records the skip.
        extracted = None
        if counts.taken and not no_summaries and ctx.engram.extraction.llm() is not None:
            extracted = ctx.engram.extraction.run_until_done(being_ref)
        if as_json:
            emit_json(
                {
                    **report.as_dict(),
                    "summaries": summaries.as_dict() if summaries else None,
                    "extraction": extracted.as_dict() if extracted else None,
                }
            )
        else:
            click.echo(
                f"imported {path}: {counts.taken} taken, {counts.duplicates} duplicates, "
                f"{counts.refused} refused, in {len(report.sessions)} session(s)"
            )
            if summaries is not None:
                click.echo(
                    f"summarised: {summaries.sessions} session summaries, {summaries.rolling} rolling "
                    f"summaries, {summaries.spines} spines"
                    + (f", {summaries.rejected} answers refused" if summaries.rejected else "")
                )
            if extracted is not None:
                from engram.adapters.cli.extraction_cmds import report_text

                click.echo("facts: " + report_text(extracted))
        for r in sorted(report.refused_lines, key=lambda r: r["line"]):
            field = f" {r['field']}:" if r["field"] and r["field"] != "line" else ""
            click.echo(f"refused: line {r['line']}:{field} {r['message']}", err=True)
        if report.refused_lines:
            sys.exit(EXIT_INVALID if report.invalid else EXIT_CONFLICT)

    @messages.command("search")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("query", metavar="Q")
    @click.option("--channel", default=None, help="Only messages of this channel.")
    @click.option("--user", default=None, help="Only the conversation with this user.")
    @click.option(
        "--limit", default=DEFAULT_MESSAGE_HITS, show_default=True, type=click.IntRange(1, MAX_MESSAGE_HITS)
    )
    @command
    def messages_search(
        ctx: Any,
        being_ref: str,
        query: str,
        channel: str | None,
        user: str | None,
        limit: int,
        *,
        as_json: bool,
    ) -> None:
        """BEING's messages that share words with Q, best first (the newest among equals)."""
        found = ctx.engram.message_search.search(being_ref, query, channel=channel, user=user, limit=limit)
        if as_json:
            emit_json(found.model_dump())
            return
        if not found.hits:
            click.echo("no message matches", err=True)
        for hit in found.hits:
            place = f"{hit.user}@{hit.channel}" if hit.channel else hit.user
            click.echo(f"{_when(hit.at)}  {place} ({hit.role})  {hit.score:.2f}  {hit.snippet}  [{hit.id}]")
