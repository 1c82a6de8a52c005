"""Reading commands: `engram recall`, `recall-cluster`, `search`, `query`, `context` (spec "Recall Flow").

Reads that reach nodes reactivate them, as the spec's tools do (`query --no-reactivate` writes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import click

from engram.adapters.cli.output import emit_json, warn_if_embedder_changed
from engram.domain.scene import Scene
from engram.services.ranking import PROFILES
from engram.services.reading import MAX_QUERY_K, MAX_SEARCH_PAGE, NodeView


def node_line(node: NodeView) -> str:
    """One node as the spec's `sceneToText`, with its status when it is not active."""
    try:
        text = Scene.model_validate(node.scene).to_text(node.feeling)
    except ValueError:  # a scene stored before a schema change: show what there is
        text = " — ".join(p for p in (node.action, f"({node.feeling})" if node.feeling else "") if p)
    status = "" if node.status == "active" else f" [{node.status}]"
    return f"{text}{status}"


def _print_nodes(nodes: Sequence[NodeView], *, scores: bool = False, explain: bool = False) -> None:
    for rank, node in enumerate(nodes, 1):
        score = f"{node.score:8.4f}  " if scores and node.score is not None else ""
        prefix = f"{rank:>3}. {score}" if scores else ""
        click.echo(f"{prefix}{node_line(node)}  ({node.id})")
        if explain and node.via is not None:
            click.echo(f"       ↳ linked from {node.via.linked_from} (cosine {node.via.link_score:.3f})")


_LINKS_HELP = "Follow the links dreaming found one hop from the top hits (default: ENGRAM_QUERY_LINKS)."


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("recall")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("text")
    @click.option("--links/--no-links", "links", default=None, help=_LINKS_HELP)
    @command
    def recall(ctx: Any, being_ref: str, text: str, links: bool | None, *, as_json: bool) -> None:
        """What TEXT brings back to BEING: up to 3 similar memories as a <memory> fragment stream.

        Prints nothing when no memory is close enough. Each recalled node is reactivated (+1); --json
        shows the nodes as this recall left them (their reactivation count after the increment).
        """
        result = ctx.engram.reading.recall(being_ref, text, links=links)
        warn_if_embedder_changed(ctx.engram)
        if as_json:
            emit_json(result.model_dump())
        elif result.text:
            click.echo(result.text)

    @cli.command("recall-cluster")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("cluster_id", type=click.UUID)
    @command
    def recall_cluster(ctx: Any, being_ref: str, cluster_id: UUID, *, as_json: bool) -> None:
        """Every node of one cluster, most recently activated first.

        Active and dying nodes are reactivated +1, dead ones +2.
        """
        result = ctx.engram.reading.recall_memory(being_ref, cluster_id)
        if as_json:
            emit_json(result.model_dump())
            return
        if not result.nodes:
            click.echo("the cluster holds no memories", err=True)
        _print_nodes(result.nodes)

    @cli.command("search")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("terms", nargs=-1, required=True)
    @click.option(
        "--mode",
        type=click.Choice(["or", "and"]),
        default="or",
        show_default=True,
        help="or: any term matches; and: every term matches (in any field).",
    )
    @click.option(
        "--limit",
        default=50,
        show_default=True,
        type=click.IntRange(1, MAX_SEARCH_PAGE),
        help="Memories per page.",
    )
    @click.option(
        "--cursor",
        default=None,
        help="The next page of the same search: the cursor the previous page printed.",
    )
    @command
    def search(
        ctx: Any,
        being_ref: str,
        terms: tuple[str, ...],
        mode: str,
        limit: int,
        cursor: str | None,
        *,
        as_json: bool,
    ) -> None:
        """Keyword search: each TERM, case-insensitively, as a substring of the
        action, the feeling or the `when` entries, or equal to a theme.

        Quote a TERM to search a phrase. Newest memories first, a page at a time. The search
        reactivates every matching memory (+1, dead +2), not only the page it prints; the next pages,
        read with --cursor, reactivate nothing more.
        """
        result = ctx.engram.reading.search_memory(
            being_ref, list(terms), mode=mode, limit=limit, cursor=cursor
        )
        if as_json:
            emit_json(result.model_dump())
            return
        if not result.nodes:
            click.echo("no memory matches", err=True)
        _print_nodes(result.nodes)
        if result.cursor is not None:
            click.echo(f"{result.total} memories match; next page: --cursor {result.cursor}", err=True)

    @cli.command("query")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("text")
    @click.option("--k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_QUERY_K))
    @click.option(
        "--profile",
        "profile_name",
        type=click.Choice(list(PROFILES)),
        default="default",
        show_default=True,
        help="How semantic, lexical, importance and recency scores combine.",
    )
    @click.option("--include-dead", is_flag=True, help="Also rank dead nodes.")
    @click.option(
        "--no-reactivate", "no_reactivate", is_flag=True, help="Read only: reactivate nothing, write nothing."
    )
    @click.option("--links/--no-links", "links", default=None, help=_LINKS_HELP)
    @click.option("--explain", is_flag=True, help="Show the link each memory came in by.")
    @command
    def query(
        ctx: Any,
        being_ref: str,
        text: str,
        k: int,
        profile_name: str,
        include_dead: bool,
        no_reactivate: bool,
        links: bool | None,
        explain: bool,
        *,
        as_json: bool,
    ) -> None:
        """The K memories of BEING most relevant to TEXT, ranked (semantic + full-text + importance)."""
        result = ctx.engram.reading.query(
            being_ref,
            text,
            k,
            profile_name=profile_name,
            include_dead=include_dead,
            reactivate=not no_reactivate,
            links=links,
        )
        warn_if_embedder_changed(ctx.engram)
        if as_json:
            emit_json(result.model_dump())
            return
        if not result.nodes:
            click.echo("no memory matches", err=True)
        _print_nodes(result.nodes, scores=True, explain=explain)

    @cli.command("context")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--user",
        help="Add where the conversation with this user stands: last session, this session, the spine.",
    )
    @command
    def context(ctx: Any, being_ref: str, user: str | None, *, as_json: bool) -> None:
        """The conversation context of BEING: system prompt, snapshot and recent memories, ready to use.

        --json gives each block as data and rendered: `system_text` (the system prompt), `messages`
        (the snapshot as a user + assistant message pair to start a conversation with) and
        `recent_text` (to inject with each turn); `text` is the three together. With --user, the
        latest session summary, the open session's rolling summary and the summary spine of the
        conversation with that user follow (`conversation`).
        """
        result = ctx.engram.reading.context(being_ref, user=user)
        if as_json:
            emit_json(result.model_dump())
        else:
            click.echo(result.text)
