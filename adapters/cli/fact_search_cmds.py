"""`engram facts search`, `engram slice` and `engram entities list|show` (issue #11, ADR 0059)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.services.fact_search import DEFAULT_FACT_HITS, DEFAULT_MIN_TRUST, PROFILES, FactHit


def _group(cli: click.Group, name: str, doc: str) -> click.Group:
    """The group `name`, made by the first module that registers a command in it."""
    found = cli.commands.get(name)
    if isinstance(found, click.Group):
        return found
    group = click.Group(name, help=doc)
    cli.add_command(group)
    return group


def _parts(hit: FactHit) -> str:
    return " + ".join(f"{name} {value:.3f}" for name, value in hit.parts.items())


def _hit_line(hit: FactHit) -> str:
    mark = "" if hit.passed_gate else "  (below the relevance gate)"
    pin = " pinned" if hit.pinned else ""
    return f"{hit.score:.3f}  {hit.text}  [{hit.subject}, importance {hit.importance}{pin}] {hit.id}{mark}"


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    facts = _group(cli, "facts", "Durable facts: add, list, search.")
    entities = _group(cli, "entities", "The entities a being's facts name.")

    @facts.command("search")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("query", metavar="Q")
    @click.option("--user", default=None, help="Only facts about this user, and the lore.")
    @click.option("--channel", default=None, help="The channel asking: its facts rank higher.")
    @click.option("--limit", default=DEFAULT_FACT_HITS, show_default=True, type=int, help="Clamped to 1..24.")
    @click.option("--profile", type=click.Choice(PROFILES), default="hybrid", show_default=True)
    @click.option(
        "--min-trust", default=DEFAULT_MIN_TRUST, show_default=True, type=float, help="trust profile."
    )
    @click.option("--strict", is_flag=True, help="Nothing when no fact passes the relevance gate.")
    @click.option("--explain", is_flag=True, help="Each hit's score by part.")
    @command
    def facts_search(
        ctx: Any,
        being_ref: str,
        query: str,
        user: str | None,
        channel: str | None,
        limit: int,
        profile: str,
        min_trust: float,
        strict: bool,
        explain: bool,
        *,
        as_json: bool,
    ) -> None:
        """BEING's facts (and its spaces') that answer Q: entity cards first, then the hits."""
        found = ctx.engram.fact_search.search(
            being_ref,
            query,
            user=user,
            channel=channel,
            limit=limit,
            profile=profile,
            min_trust=min_trust,
            strict=strict,
        )
        if as_json:
            emit_json(found.model_dump())
            return
        if not found.hits:
            click.echo("no fact answers", err=True)
        for card in found.cards:
            click.echo(card.line)
        for hit in found.hits:
            click.echo(_hit_line(hit))
            if explain:
                click.echo(f"       = {_parts(hit)}")

    @cli.command("slice")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--user", required=True, help="Whose conversation it is.")
    @click.option("--channel", default=None, help="Where: its messages and facts.")
    @click.option("--query", default=None, help="The message being answered.")
    @command
    def slice_(
        ctx: Any, being_ref: str, user: str, channel: str | None, query: str | None, *, as_json: bool
    ) -> None:
        """The memory a prompt gets (spec 001): the user's facts, relevant facts and lore, messages."""
        found = ctx.engram.fact_search.slice(being_ref, user, channel=channel, query=query)
        if as_json:
            emit_json(found.model_dump())
            return
        click.echo(found.text or "(nothing remembered for this user)")

    @entities.command("list")
    @click.argument("being_ref", metavar="BEING")
    @command
    def entities_list(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """Every entity BEING's facts name (merges followed)."""
        found = ctx.engram.fact_search.entities(being_ref)
        if as_json:
            emit_json([e.model_dump() for e in found])
            return
        if not found:
            click.echo("no entity yet", err=True)
        for e in found:
            also = f"  (also {', '.join(e.aliases)})" if e.aliases else ""
            label = f" {e.label}" if e.label else ""
            click.echo(f"{e.ref}{label}: {e.facts} facts about it, {e.mentions} mentions{also}")

    @entities.command("show")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("ref", metavar="REF")
    @command
    def entities_show(ctx: Any, being_ref: str, ref: str, *, as_json: bool) -> None:
        """One entity: its card, the facts about it and those that mention it."""
        page = ctx.engram.fact_search.entity(being_ref, ref)
        if as_json:
            emit_json(page.model_dump())
            return
        if page.merged_into:
            click.echo(f"{page.asked} is merged into {page.ref}")
        click.echo(page.ref + (f" ({page.label})" if page.label else ""))
        if page.aliases:
            click.echo(f"aliases: {', '.join(page.aliases)}")
        if page.card:
            click.echo(page.card.line)
        for title, hits in (("about it", page.facts), ("mentioned in", page.mentions)):
            if hits:
                click.echo(f"{title}:")
                for hit in hits:
                    click.echo(f"  - {hit.text} {hit.id}")
