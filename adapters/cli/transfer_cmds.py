"""`engram export BEING --out FILE` and `engram import FILE` (ADR 0070)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from engram.adapters.cli.output import EXIT_CONFLICT, emit_json, fail_text


def _progress(label: str) -> Callable[[int], None] | None:
    if not sys.stderr.isatty():
        return None
    return lambda n: click.echo(f"\r{label} {n:,} events", err=True, nl=False)


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds `engram export` and `engram import` to `cli`; `command` adds --json and error handling."""

    @cli.command("export")
    @click.argument("being_ref", metavar="BEING")
    @click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), required=True)
    @click.option("--with-keys", is_flag=True, help="Include the being's data keys (admin only).")
    @command
    def export(ctx: Any, being_ref: str, out: Path, with_keys: bool, *, as_json: bool) -> None:
        """Write BEING's events to FILE: a versioned file with a manifest and the chain hashes."""
        from engram.adapters.eventstore import being_transfer
        from engram.services.beings import resolve_being

        engram = ctx.engram
        being = resolve_being(engram.store, being_ref)
        keys: Callable[[Any], str | None] | None = None
        if with_keys:
            keys = being_transfer.key_exporter(engram.store.app)
            if keys is None:
                fail_text("--with-keys: this deployment has no key store to export keys from")
        started = time.perf_counter()
        partial = out.with_name(out.name + ".partial")
        partial.unlink(missing_ok=True)
        # A file with the being's keys reads all its memories: only its owner may read it, as keys.json.
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if with_keys else 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            summary = being_transfer.export_being(
                engram.store.app, being.name, being.id, f, with_keys=keys, progress=_progress("exported")
            )
        partial.replace(out)  # a file at `out` is always whole
        seconds = time.perf_counter() - started
        result = {**summary.__dict__, "file": str(out), "seconds": round(seconds, 3)}
        if as_json:
            emit_json(result)
            return
        if sys.stderr.isatty():
            click.echo("", err=True)
        click.echo(
            f"exported {summary.being}: {summary.events:,} events of {summary.aggregates:,} aggregates "
            f"(positions {summary.first_position}–{summary.last_position}) to {out}"
        )

    @cli.command("import")
    @click.argument("path", metavar="FILE", type=click.Path(path_type=Path, exists=True, dir_okay=False))
    @click.option("--yes", is_flag=True, help="Import over a being that has other events, without asking.")
    @command
    def import_(ctx: Any, path: Path, yes: bool, *, as_json: bool) -> None:
        """Bring the events of an `engram export` file into this deployment (ids preserved), then bring
        the views up to date. Idempotent: what is here already is skipped."""
        from engram.adapters.eventstore import being_transfer

        engram = ctx.engram
        started = time.perf_counter()
        try:
            plan = being_transfer.plan_import(engram.store.app, path)
        except being_transfer.TransferRefused as exc:
            fail_text(f"import refused, nothing written: {exc}", EXIT_CONFLICT)
        if plan.others and plan.to_write and not yes:
            question = (
                f"{plan.being} exists here with {plan.others} events the file does not have; "
                f"import {len(plan.to_write)} events over it?"
            )
            if not sys.stdin.isatty() or not click.confirm(question, default=False):
                fail_text(
                    f"import refused, nothing written: {plan.being} exists here with {plan.others} other "
                    "events (use --yes to import over existing data)",
                    EXIT_CONFLICT,
                )
        written = being_transfer.apply_import(engram.store.app, plan)
        engram.store.known_beings.clear()
        engram.views.catch_up_or_rebuild()
        seconds = time.perf_counter() - started
        result = {
            "being": plan.being,
            "events": len(plan.events),
            "written": written,
            "present": plan.present,
            "others": plan.others,
            "seconds": round(seconds, 3),
        }
        if as_json:
            emit_json(result)
        elif written:
            click.echo(f"imported {plan.being}: {written:,} events written, {plan.present:,} already here")
        else:
            click.echo(f"nothing to import: the {plan.present:,} events of {plan.being} are here already")
