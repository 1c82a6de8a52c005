"""`engram undo DECISION_ID`: reverse one recorded decision (ADR 0072). No MCP tool: an agent must
not undo; over HTTP only an admin token may."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json


def _plan_lines(plan: Any) -> list[str]:
    return [f"  {i}. {step.describe()}" for i, step in enumerate(plan.steps, 1)]


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.command("undo")
    @click.argument("decision", metavar="DECISION_ID")
    @click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
    @click.option("--cascade", is_flag=True, help="Undo the later decisions that depend on it first.")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation (for scripts).")
    @click.option("--reason", default="", metavar="R", help="Why: recorded with the undo.")
    @click.option("--being", "being", default=None, metavar="BEING", help="Refuse unless BEING owns it.")
    @command
    def undo(
        ctx: Any,
        decision: str,
        dry_run: bool,
        cascade: bool,
        yes: bool,
        reason: str,
        being: str | None,
        *,
        as_json: bool,
    ) -> None:
        """Reverse one recorded decision, named ID@VERSION as `engram history` shows it: a patrol
        consolidation (the survivor node's AbsorbedNodes event), a manual supersede (the old note's
        Superseded event), an entity alias merge (the entity map's Merged event), a cluster merge (the
        merged cluster's Deleted event) or split (the split-off cluster's Created event, @1).
        Compensating events restore the state; nothing is deleted from the log."""
        undo = ctx.engram.undo
        planned = undo.undo(decision, reason=reason, being=being, cascade=cascade, dry_run=True)
        if dry_run:
            if as_json:
                emit_json(planned.as_dict())
            else:
                click.echo(f"plan (dry run, nothing written) for {planned.plan.decision}:")
                click.echo("\n".join(_plan_lines(planned.plan)))
            return
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("undo changes memories: pass --yes to confirm (no terminal to ask on)")
            click.echo("\n".join(_plan_lines(planned.plan)), err=True)
            click.confirm("Undo these decisions?", abort=True, err=True)
        done = undo.undo(decision, reason=reason, being=being, cascade=cascade)
        if as_json:
            emit_json(done.as_dict())
            return
        click.echo("\n".join(_plan_lines(done.plan)))
        n = len(done.plan.steps)
        click.echo(f"undone: {n} decision{'' if n == 1 else 's'}")
