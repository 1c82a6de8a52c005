"""`engram sessions …`: a being's conversation sessions and their summaries (issue #10, ADR 0053)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.services.conversation_summaries import SummaryProgress, SummaryReport
from engram.services.sessions import DEFAULT_SESSIONS, MAX_SESSIONS, SessionDetail, SessionRow


def _when(text: str | None) -> str:
    """An instant as the view keeps it (`2026-10-30T10:00:00.000000+00:00`), to the minute."""
    return f"{text[:10]} {text[11:16]}" if text else "-"


def _line(s: SessionRow) -> str:
    state = f"closed ({s.close_reason})" if s.ended_at else "open"
    about = s.summary["one_liner"] if s.summary else (s.rolling or "").split("\n")[0]
    when = f"{_when(s.started_at)} → {_when(s.last_at)}"
    return f"{s.id}  {s.user:<12} #{s.ordinal:<3} {when}  {s.turns:>4} turns  {state:<14} {about}"


def _print_detail(d: SessionDetail) -> None:
    click.echo(f"session {d.id}: {d.being} with {d.user}, #{d.ordinal}")
    click.echo(f"  started {_when(d.started_at)}, last message {_when(d.last_at)}, {d.turns} turns")
    if d.ended_at:
        click.echo(f"  closed ({d.close_reason}) at {_when(d.ended_at)}, seen {_when(d.closed_seen_at)}")
    else:
        click.echo("  open")
    if d.summary:
        click.echo(f"summary ({d.summary_method}): {d.summary['one_liner']}")
        for key in ("what_mattered", "open_loops", "commitments", "people"):
            if d.summary[key]:
                click.echo(f"  {key.replace('_', ' ')}:")
                for item in d.summary[key]:
                    click.echo(f"    - {item}")
        click.echo(f"  tone: {d.summary['tone']}")
    rolling = [v for v in d.versions if v.kind == "rolling"]
    if rolling:
        click.echo(f"rolling summaries ({len(rolling)}, newest first):")
        for v in rolling:
            head = f"  v{v.version} ({v.method}, turns 1-{v.upto}, {_when(v.at)})"
            click.echo(f"{head}: refused: {v.reason}" if v.method == "rejected" else head)
            if v.content:
                for line in str(v.content).split("\n"):
                    click.echo(f"    {line}")
    refused = [v for v in d.versions if v.kind == "session" and v.method == "rejected"]
    for v in refused:
        click.echo(f"refused summary answer ({v.model}, {_when(v.at)}): {v.reason}")
    click.echo(f"messages ({len(d.messages)}):")
    for m in d.messages:
        who = m.user if m.role == "user" else d.being
        click.echo(f"  {_when(m.at)}  {who}: {m.text}")


def _report(report: SummaryReport) -> str:
    parts = [
        f"{report.sessions} session summaries",
        f"{report.rolling} rolling summaries",
        f"{report.spines} spines",
    ]
    if report.rejected:
        parts.append(f"{report.rejected} answers refused (asked again next time)")
    if report.deferred:
        parts.append(f"{report.deferred} deferred (LLM unavailable)")
    if report.skipped:
        parts.append(f"{report.skipped} already written by another process")
    return f"{report.conversations} conversations: " + ", ".join(parts)


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds `engram sessions` to `cli`; `command` adds --json and error handling."""

    @cli.group("sessions")
    def sessions() -> None:
        """A being's conversation sessions and their summaries."""

    @sessions.command("list")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--user", help="Only the sessions with this user.")
    @click.option(
        "--limit", default=DEFAULT_SESSIONS, show_default=True, type=click.IntRange(1, MAX_SESSIONS)
    )
    @command
    def list_sessions(ctx: Any, being_ref: str, user: str | None, limit: int, *, as_json: bool) -> None:
        """BEING's sessions, the latest first: user, number, times, turns, state and summary."""
        found = ctx.engram.sessions.list(being_ref, user=user, limit=limit)
        if as_json:
            emit_json(found.model_dump())
            return
        if found.state is not None:
            st = found.state
            said = f'; last said: "{st.last_user_message}"' if st.last_user_message else ""
            now = f"open session: {st.open_turns} turns" if st.open_session else "no open session"
            click.echo(
                f"{st.user}: {st.message_count} messages, the latest {(st.last_interaction or '-')[:16]}; "
                f"{now}; spine v{st.spine_version}{said}"
            )
        if not found.sessions:
            click.echo("no sessions", err=True)
        for s in found.sessions:
            click.echo(_line(s))

    @sessions.command("show")
    @click.argument("session_id", metavar="ID")
    @click.option("--being", "being_ref", help="The being whose session it is (default: found by its id).")
    @command
    def show(ctx: Any, session_id: str, being_ref: str | None, *, as_json: bool) -> None:
        """One session: times, turns, close reason, summary, the rolling summary's versions, messages."""
        detail = ctx.engram.sessions.show(session_id, being_ref)
        if as_json:
            emit_json(detail.model_dump())
        else:
            _print_detail(detail)

    @sessions.command("summarize")
    @click.argument("being_ref", metavar="BEING")
    @command
    def summarize(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """Write the summaries that are due for BEING now (what the worker does every
        ENGRAM_CONVERSATION_INTERVAL_S): closed sessions, open sessions' rolling summaries, spines."""

        def progress(p: SummaryProgress) -> None:
            if not as_json and sys.stderr.isatty():
                click.echo(f"\r{p.done}/{p.total} conversations", nl=False, err=True)

        report = ctx.engram.summaries.run_due(being_ref, progress=progress)
        if as_json:
            emit_json(report.as_dict())
        else:
            click.echo(_report(report))

    @sessions.command("resummarize")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--user", help="Only the conversation with this user.")
    @command
    def resummarize(ctx: Any, being_ref: str, user: str | None, *, as_json: bool) -> None:
        """With an LLM configured: write LLM versions of BEING's extractive session summaries (and
        of each conversation's latest spine when it is extractive). The old versions stay in the log.
        Without an LLM it says so and exits non-zero (4)."""
        report = ctx.engram.summaries.resummarize(being_ref, user=user)
        if as_json:
            emit_json(report.as_dict())
        else:
            click.echo(_report(report))
