"""`engram clusters BEING` and `engram nodes BEING`: look at a being's memory without changing it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("clusters")
    @click.argument("being_ref", metavar="BEING")
    @command
    def clusters(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """BEING's clusters as a tree: the two roots, their sub-clusters, and how many nodes each holds
        (active / all). Reactivates nothing."""
        from engram.services.listing import Listing

        roots = Listing(ctx.engram).clusters(being_ref)
        if as_json:
            emit_json([r.model_dump() for r in roots])
            return

        def show(tree: Any, depth: int) -> None:
            click.echo(
                f"{'  ' * depth}{tree.name}  ({tree.active_count} active / {tree.total_count} nodes)  {tree.id}"
            )
            for child in tree.children:
                show(child, depth + 1)

        for root in roots:
            show(root, 0)

    @cli.command("nodes")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--cluster", "cluster_ref", metavar="CLUSTER", help="Only this cluster's (an id or a name)."
    )
    @click.option("--state", type=click.Choice(["active", "dying", "dead"]), help="Only nodes in this state.")
    @click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
    @click.option(
        "--include-sensitive", is_flag=True, help="Show sensitive memories too (never shown by recall)."
    )
    @command
    def nodes(
        ctx: Any,
        being_ref: str,
        cluster_ref: str | None,
        state: str | None,
        limit: int,
        include_sensitive: bool,
        *,
        as_json: bool,
    ) -> None:
        """BEING's memory nodes, oldest first, with their state and id. Reactivates nothing. Memories
        past their notes' expiry are left out, and sensitive ones unless --include-sensitive."""
        from engram.adapters.cli.reading_cmds import node_line
        from engram.services.listing import Listing

        found = Listing(ctx.engram).nodes(
            being_ref, cluster=cluster_ref, state=state, limit=limit, include_sensitive=include_sensitive
        )
        if as_json:
            emit_json([n.model_dump() for n in found])
            return
        if not found:
            click.echo("no nodes", err=True)
        for node in found:
            click.echo(f"{node_line(node)}  ({node.id})")
