"""`engram facts add|list|pin|unpin|archive|import`, `engram lore`, `engram space …` and
`engram entity merge|unmerge`: the write side of facts (issue #11, ADR 0056/0057)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import click

from engram.adapters.cli.output import EXIT_INVALID, emit_json
from engram.domain.errors import InvalidInput
from engram.services.commands import FactInput, FactWritten
from engram.services.fact_import import FactImportProgress, import_facts
from engram.services.fact_listing import MAX_LISTED_FACTS, list_facts, list_spaces


def facts_group(cli: click.Group) -> click.Group:
    """The `facts` group, made by the first module that registers a command in it."""
    found = cli.commands.get("facts")
    if isinstance(found, click.Group):
        return found

    @cli.group("facts")
    def facts() -> None:
        """A being's durable facts: add, list, pin, archive, import, search."""

    return facts


def _fact_id(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise InvalidInput(f"{value!r} is not a fact id", field="id") from None


def _written(w: FactWritten) -> str:
    return (
        f"{w.outcome} fact {w.fact_id} of {w.owner_kind} {w.owner}: version {w.version}, "
        f"importance {w.importance}, {w.status}"
    )


def _progress(label: str) -> Callable[[FactImportProgress], None]:
    live = sys.stderr.isatty()

    def show(p: FactImportProgress) -> None:
        text = (
            f"{label}: {p.read}/{p.total} lines, written {p.written}, unchanged {p.unchanged}, "
            f"refused {p.refused}"
        )
        click.echo(f"\r{text}" if live else text, err=True, nl=not live or p.read >= p.total)

    return show


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""
    facts = facts_group(cli)

    @facts.command("add")
    @click.argument("being_ref", metavar="BEING")
    # --subject and --text are checked with the rest of the fact (invalid_input naming the field).
    @click.option("--subject", default=None, help="A user id, __lore__, or an entity ref (required).")
    @click.option("--text", default=None, help="The fact, one line (required).")
    @click.option("--type", "fact_type", default="other", show_default=True,
                  help="preference, profile, relationship, project or other.")  # fmt: skip
    @click.option("--memory-key", default=None, help="type|entityType|primaryRef|factType: updates in place.")
    @click.option("--importance", type=int, default=1, show_default=True, help="0 to 3.")
    @click.option("--pinned", is_flag=True, help="Pin it: importance 3, never archived.")
    @click.option("--entity", "entities", multiple=True, help="An entity ref <type>:<slug> (repeatable).")
    @click.option("--entity-label", default=None)
    @click.option("--evidence", default=None, help="What it was read from.")
    @click.option("--confidence", type=float, default=1.0, show_default=True, help="0 to 1.")
    @click.option("--channel", default=None, help="A ranking hint, never a partition.")
    @click.option("--space", default=None, help="Write it to this space (the being must be a member).")
    @click.option("--source", default="manual", show_default=True,
                  help="manual, extraction, seeded_profile, lore or curated_fold.")  # fmt: skip
    @click.option("--source-trust", type=float, default=1.0, show_default=True, help="0 to 1.")
    @command
    def facts_add(ctx: Any, being_ref: str, subject: str | None, text: str | None, fact_type: str,
                  memory_key: str | None, importance: int, pinned: bool, entities: tuple[str, ...],
                  entity_label: str | None, evidence: str | None, confidence: float,
                  channel: str | None, space: str | None, source: str, source_trust: float,
                  *, as_json: bool) -> None:  # fmt: skip
        """State a fact for BEING (or its --space). The same key again is the same fact: said again it
        is reinforced, changed it is revised (a new version; the old stays in its history)."""
        given = {"subject": subject, "text": text}
        item = FactInput.model_validate(
            {
                **{k: v for k, v in given.items() if v is not None},
                "type": fact_type,
                "memory_key": memory_key,
                "importance": importance,
                "pinned": pinned,
                "entity_refs": list(entities),
                "entity_label": entity_label,
                "evidence": evidence,
                "confidence": confidence,
                "channel": channel,
                "source": source,
                "source_trust": source_trust,
            }
        )
        written = ctx.engram.facts.state(being_ref, item, space=space)
        if as_json:
            emit_json(written.model_dump())
        else:
            click.echo(_written(written))

    @facts.command("list")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--subject", default=None, help="Only facts about this subject.")
    @click.option("--all", "include_archived", is_flag=True, help="Archived facts too.")
    @click.option("--limit", default=100, show_default=True, type=click.IntRange(1, MAX_LISTED_FACTS))
    @command
    def facts_list(ctx: Any, being_ref: str, subject: str | None, include_archived: bool, limit: int,
                   *, as_json: bool) -> None:  # fmt: skip
        """BEING's own facts and its spaces', the latest change first (active only unless --all)."""
        rows = list_facts(ctx.engram.store, ctx.engram.views, being_ref, subject=subject,
                          include_archived=include_archived, limit=limit)  # fmt: skip
        if as_json:
            emit_json(rows)
            return
        for r in rows:
            pin = " pinned" if r["pinned"] else ""
            click.echo(
                f"{r['id']}  [{r['owner']}] {r['subject']}: {r['text']}  "
                f"({r['fact_type']}, importance {r['importance']}{pin}, {r['status']}, v{r['version']})"
            )
        if not rows:
            click.echo("no facts", err=True)

    def change(name: str, verb: str) -> None:
        @facts.command(name)
        @click.argument("being_ref", metavar="BEING")
        @click.argument("fact_ref", metavar="ID")
        @command
        def facts_change(ctx: Any, being_ref: str, fact_ref: str, *, as_json: bool) -> None:
            done = getattr(ctx.engram.facts, name)(being_ref, _fact_id(fact_ref))
            if as_json:
                emit_json(done.model_dump())
            else:
                click.echo(f"{verb} fact {done.details['fact_id']} ({done.details['status']})")

        facts_change.__doc__ = f"{verb.capitalize()} one of BEING's facts (or of its spaces')."

    change("pin", "pinned")
    change("unpin", "unpinned")
    change("archive", "archived")

    @facts.command("import")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("path", metavar="FILE.jsonl", type=click.Path(path_type=Path, dir_okay=False))
    @click.option("--space", default=None, help="Import into this space (the being must be a member).")
    @command
    def facts_import(ctx: Any, being_ref: str, path: Path, space: str | None, *, as_json: bool) -> None:
        """Import a seeded profile: one fact object per line (as `facts add` takes it; source
        `seeded_profile` unless given). A line that says what its fact says already writes nothing, so a
        re-run changes nothing. A bad line is refused naming its number and field (exit 2); the others
        are written."""
        from engram.adapters.cli.main import _read_lines  # the CLI's reader of JSON-lines files

        lines = _read_lines(path)
        if not lines:
            raise InvalidInput(f"{path} holds no facts")
        report = import_facts(ctx.engram.facts, being_ref, [(n.number, n.text) for n in lines],
                              space=space, progress=_progress(f"importing {path.name}"))  # fmt: skip
        p = report.progress
        if as_json:
            emit_json(report.as_dict())
        else:
            outcomes = ", ".join(f"{n} {k}" for k, n in sorted(report.outcomes.items())) or "none new"
            click.echo(
                f"imported {path}: {p.written} written ({outcomes}), {p.unchanged} unchanged, "
                f"{p.refused} refused"
            )
        for r in report.refusals:
            named = r["field"] and r["field"] != "line" and not r["message"].startswith(r["field"])
            field = f" {r['field']}:" if named else ""
            click.echo(f"refused: line {r['line']}:{field} {r['message']}", err=True)
        if report.refusals:
            sys.exit(EXIT_INVALID)

    @cli.command("lore")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("line", metavar="LINE")
    @click.option("--space", default=None, help="Keep it in this space's lore.")
    @command
    def lore(ctx: Any, being_ref: str, line: str, space: str | None, *, as_json: bool) -> None:
        """Keep a lore line about BEING's world: `Memory line: LINE.` (subject __lore__, confidence
        0.72). The latest 120 lines stay active."""
        written = ctx.engram.facts.lore(being_ref, line, space=space)
        if as_json:
            emit_json(written.model_dump())
        else:
            click.echo(_written(written))

    _spaces(cli, command)
    _entities(cli, command)


def _spaces(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group("space")
    def space() -> None:
        """Spaces: facts shared by several beings."""

    @space.command("create")
    @click.argument("name")
    @click.option("--being", "beings", multiple=True, help="A member (repeatable; at least one).")
    @command
    def space_create(ctx: Any, name: str, beings: tuple[str, ...], *, as_json: bool) -> None:
        """Create the space NAME with its member beings."""
        done = ctx.engram.spaces.create(name, list(beings))
        if as_json:
            emit_json(done.model_dump())
        else:
            click.echo(f"created space {name} ({done.details['space_id']}) with {', '.join(beings)}")

    def membership(verb: str) -> None:
        @space.command(verb)
        @click.argument("name")
        @click.argument("being_ref", metavar="BEING")
        @command
        def space_membership(ctx: Any, name: str, being_ref: str, *, as_json: bool) -> None:
            done = getattr(ctx.engram.spaces, verb)(name, being_ref)
            if as_json:
                emit_json(done.model_dump())
            else:
                click.echo(f"{being_ref} {verb} {name}: {done.details['members']} member(s)")

        space_membership.__doc__ = f"BEING {verb}s the space NAME."

    membership("join")
    membership("leave")

    @space.command("list")
    @click.argument("being_ref", metavar="BEING", required=False)
    @command
    def space_list(ctx: Any, being_ref: str | None, *, as_json: bool) -> None:
        """Every space, or the spaces BEING is in, with their members."""
        rows = list_spaces(ctx.engram.store, ctx.engram.views, being_ref)
        if as_json:
            emit_json(rows)
            return
        for s in rows:
            click.echo(f"{s['name']}  {s['id']}  members: {', '.join(s['members'])}")
        if not rows:
            click.echo("no spaces", err=True)


def _entities(cli: click.Group, command: Callable[[Any], Any]) -> None:
    found = cli.commands.get("entity")
    entity = found if isinstance(found, click.Group) else None
    if entity is None:

        @cli.group("entity")
        def entity_group() -> None:
            """Entities of a being's facts: merge and unmerge aliases."""

        entity = entity_group

    @entity.command("merge")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("alias", metavar="ALIAS")
    @click.argument("into", metavar="INTO")
    @click.option("--space", default=None, help="Merge in this space's entities.")
    @command
    def entity_merge(ctx: Any, being_ref: str, alias: str, into: str, space: str | None,
                     *, as_json: bool) -> None:  # fmt: skip
        """Read ALIAS as INTO from now on (e.g. person:makesh into person:mukesh); cycles are refused."""
        done = ctx.engram.facts.merge_entities(being_ref, alias, into, space=space)
        if as_json:
            emit_json(done.model_dump())
        else:
            click.echo(f"merged {alias} into {into} for {done.details['owner']}")

    @entity.command("unmerge")
    @click.argument("being_ref", metavar="BEING")
    @click.argument("alias", metavar="ALIAS")
    @click.option("--space", default=None, help="Unmerge in this space's entities.")
    @command
    def entity_unmerge(ctx: Any, being_ref: str, alias: str, space: str | None, *, as_json: bool) -> None:
        """ALIAS reads as itself again."""
        done = ctx.engram.facts.unmerge_entities(being_ref, alias, space=space)
        if as_json:
            emit_json(done.model_dump())
        else:
            click.echo(f"unmerged {alias} for {done.details['owner']}")
