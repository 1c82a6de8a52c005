"""`engram sleep|wake|mode|dream BEING`: a being's sleep now (spec 003, issue #12, ADR 0060). The
schedule is `engram being sleep BEING`; the worker ticks every being by itself."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.domain.sleep import Depth
from engram.services.sleep import MAX_DREAM_TICKS, TickReport


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("sleep")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--hours", type=click.FloatRange(0, 23, min_open=True), help="How long (default: the schedule's)."
    )
    @click.option("--deep", is_flag=True, help="Deep sleep: urgent messages do not wake it.")
    @click.option("--reason", default="manual", show_default=True, help="Recorded with the transition.")
    @command
    def sleep(
        ctx: Any, being_ref: str, hours: float | None, deep: bool, reason: str, *, as_json: bool
    ) -> None:
        """Put BEING to sleep now: it compacts, then dreams, until the sleep ends or it is woken."""
        depth = Depth.DEEP.value if deep else None
        done = ctx.engram.sleep.sleep(being_ref, hours=hours, depth=depth, reason=reason)
        if as_json:
            emit_json(done.model_dump())
        else:
            d = done.details
            click.echo(f"asleep ({d['depth']}, {d['phase']}) until {d['wake_at']}")

    @cli.command("wake")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--reason", default="manual", show_default=True, help="Recorded with the transition.")
    @command
    def wake(ctx: Any, being_ref: str, reason: str, *, as_json: bool) -> None:
        """Wake BEING. While it is compacting, the wake waits until the phase completes (recorded)."""
        done = ctx.engram.sleep.wake(being_ref, reason=reason)
        if as_json:
            emit_json(done.model_dump())
        elif done.details["outcome"] == "deferred":
            click.echo("still compacting: it wakes when the phase completes (`engram dream` finishes it now)")
        else:
            until = done.details.get("cooldown_until")
            click.echo("awake" + (f"; no scheduled sleep before {until}" if until else ""))

    @cli.command("mode")
    @click.argument("being_ref", metavar="BEING")
    @command
    def mode(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """BEING's mode and phase, since when, the next transition, its cooldown, what is pending."""
        report = ctx.engram.sleep.mode(being_ref)
        emit_json(report.model_dump()) if as_json else click.echo(report.text())

    @cli.command("dream")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--ticks",
        type=click.IntRange(1, MAX_DREAM_TICKS),
        help="How many sleep ticks (default: until one finds nothing to do).",
    )
    @command
    def dream(ctx: Any, being_ref: str, ticks: int | None, *, as_json: bool) -> None:
        """Run BEING's sleep ticks now, whatever the clock (the worker does it by itself). An awake
        being naps for them and wakes after."""
        show = not as_json and sys.stderr.isatty()

        def progress(n: int, r: TickReport) -> None:
            if show:
                did = ", ".join(f"{k} {v}" for k, v in r.did.items()) or "-"
                click.echo(f"\rtick {n} ({r.phase or r.mode}): {did}\033[K", nl=False, err=True)

        report = ctx.engram.sleep.dream(being_ref, ticks=ticks, progress=progress)
        if show:
            click.echo("", err=True)
        emit_json(report.model_dump()) if as_json else click.echo(report.text())
