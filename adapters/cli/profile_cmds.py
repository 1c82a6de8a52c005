"""`engram entities profile BEING [REF]` and `engram reflections BEING` (issue #12, ADR 0064, 0065)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.fact_search_cmds import _group
from engram.adapters.cli.output import emit_json


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    entities = _group(cli, "entities", "The entities a being's facts name.")

    @entities.command("profile")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("ref", metavar="REF", required=False)
    @command
    def entities_profile(ctx: Any, being_ref: str, ref: str | None, *, as_json: bool) -> None:
        """What BEING knows of entity REF and its relationship with it (built while it dreams);
        without REF, every profile in one line each."""
        if ref is not None:
            profile = ctx.engram.profiles.profile(being_ref, ref)
            emit_json(profile.model_dump()) if as_json else click.echo(profile.text())
            return
        found = ctx.engram.profiles.profiles(being_ref)
        if as_json:
            emit_json([p.model_dump() for p in found])
            return
        if not found:
            click.echo("no profile yet: profiles are built while the being dreams (`engram dream`)", err=True)
        for p in found:
            r = p.relationship
            click.echo(
                f"{p.ref}: {r.state} ({r.favorability:.2f}, {r.interaction_count} interactions), "
                f"{len(p.attributes)} attributes, {p.observed - p.folded} observations to fold"
            )

    @cli.command("reflections")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100))
    @command
    def reflections(ctx: Any, being_ref: str, limit: int, *, as_json: bool) -> None:
        """BEING's reflections, the newest first: questions, insights and their sources, and the
        importance gathered towards the next one."""
        found = ctx.engram.reflections.list(being_ref, limit=limit)
        emit_json(found.model_dump()) if as_json else click.echo(found.text())
