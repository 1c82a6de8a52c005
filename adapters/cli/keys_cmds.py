"""`engram keys seal [BEING]`: make a log written before encryption or before item keys erasable
(ADR 0095); and what `engram verify --against` says of a checkpoint older than a seal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from engram.adapters.cli.forget_cmds import _confirmed
from engram.adapters.cli.output import EXIT_CONFLICT, emit_json, fail_text
from engram.services.key_sealing import Sealed


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group("keys")
    def keys() -> None:
        """The keys events are sealed with (crypto-shredding, ADR 0073, 0075)."""

    @keys.command("seal")
    @click.argument("being_ref", metavar="[BEING]", required=False)
    @click.option("--dry-run", is_flag=True, help="Count what would be sealed; write nothing.")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--by", default="cli", show_default=True, help="Who seals, for the receipt.")
    @command
    def seal(ctx: Any, being_ref: str | None, dry_run: bool, yes: bool, by: str, *, as_json: bool) -> None:
        """Rewrite the stored events of BEING (every being without it) that were written in clear or
        under the being's key where an item or subject key is chosen now, into the form a new write
        gives them, so that `forget` can erase them. The hash chain is computed again from the first
        rewritten position and a `KeySealing` receipt appended; the old bytes are scrubbed from the
        files. Resumable: run it again after a kill."""
        target = f"being {being_ref!r}" if being_ref else "every being"
        question = (
            f"Rewrite the stored events of {target} (and the log's hash chain after them)? "
            "Checkpoints taken before will answer 'resealed'."
        )
        if not dry_run and not _confirmed(question, yes):
            fail_text("nothing sealed", EXIT_CONFLICT)
        live = sys.stderr.isatty() and not as_json

        def progress(position: int, head: int) -> None:
            if live:
                of = f"/{head}" if head else ""
                click.echo(f"\r\x1b[Ksealing: position {position}{of}", err=True, nl=False)

        done = ctx.engram.key_sealing.seal(being_ref, by=by, dry_run=dry_run, progress=progress)
        if live:
            click.echo("\r\x1b[K", err=True, nl=False)
        _report(done, as_json)


def _report(done: Sealed, as_json: bool) -> None:
    if as_json:
        emit_json(done.model_dump(mode="json"))
        return
    click.echo(done.message)
    if done.nothing_to_seal:
        return
    click.echo("  " + ", ".join(f"{k} {v}" for k, v in done.counts.items()))
    if done.position is not None:
        click.echo(
            f"  receipt {done.receipt_id} at position {done.position}; chain head was "
            f"{done.old_head_position} {done.old_head_hash}, is now {done.new_head_hash}"
        )
    if done.files_scrubbed:
        click.echo(f"  scrubbed: {', '.join(done.files_scrubbed)}")


def checkpoint_resealed(engram: Any, path: Path) -> dict[str, Any] | None:
    """For `verify --against`: the seal that rewrote the checkpoint's position, if any."""
    checkpoint = json.loads(path.read_text())
    result: dict[str, Any] | None = engram.key_sealing.checkpoint_before_seal(
        int(checkpoint["position"]), str(checkpoint["hash"])
    )
    if result is not None:
        result["checkpoint_position"] = int(checkpoint["position"])
    return result


def print_resealed(info: dict[str, Any]) -> None:
    where = info.get("first_position")
    who = f" by {info['sealed_by']} at {info['sealed_at']}" if info.get("sealed_by") else ""
    head = (
        f"the log was resealed from position {where}{who} (`keys seal`, receipt {info['receipt_id']}); "
        f"the checkpoint (position {info['checkpoint_position']}) predates it"
    )
    if info["matched_before_seal"]:
        click.echo(f"{head}: it matches the chain as it was before the seal. Take a new checkpoint.")
    else:
        click.echo(f"{head}, and it DOES NOT match the chain as it was before the seal either")
