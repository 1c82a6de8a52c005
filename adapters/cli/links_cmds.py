"""`engram links BEING [--node ID]`: the A-MEM links dreaming found between a being's memories,
with their scores (issue #12, ADR 0062)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.services.memory_links import MAX_LIST


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's command to `cli`; `command` adds --json and error handling."""

    @cli.command("links")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--node", "memory_id", help="Only the links of this memory (a node's or a fact's id).")
    @click.option(
        "--limit", type=int, default=100, show_default=True, help=f"At most this many (1-{MAX_LIST})."
    )
    @command
    def links(ctx: Any, being_ref: str, memory_id: str | None, limit: int, *, as_json: bool) -> None:
        """BEING's links between alike memories (cosine ≥ 0.7), the strongest first."""
        report = ctx.engram.links.links(being_ref, memory_id=memory_id, limit=limit)
        if as_json:
            emit_json(report.model_dump())
        else:
            click.echo(report.text())
