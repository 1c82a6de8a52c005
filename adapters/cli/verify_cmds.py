"""`engram verify`: check the log's hash chain, export and check checkpoints (ADR 0069)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from engram.adapters.cli.output import EXIT_CONFLICT, emit_json, fail_text

CHECKPOINT_FORMAT = "engram-checkpoint/1"
EXIT_BROKEN = 6
"""`engram verify` found the chain broken (or a checkpoint that does not match)."""
EXIT_RESEALED = 7
"""The chain is intact and the checkpoint matched it before a `keys seal` rewrote its position (ADR 0095)."""


def _progress() -> Callable[[int], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(checked: int) -> None:
        click.echo(f"\rverified {checked:,} events", err=True, nl=False)

    return show


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds `engram verify` to `cli`; `command` adds --json and error handling."""

    @cli.command("verify")
    @click.option(
        "--from", "start", type=click.IntRange(min=0), default=0, help="Check after this log position."
    )
    @click.option(
        "--checkpoint-out", type=click.Path(path_type=Path), help="Write the head (position, hash) here."
    )
    @click.option(
        "--against", type=click.Path(path_type=Path, exists=True), help="A checkpoint file to check."
    )
    @click.option("--seal", is_flag=True, help="First hash the events written before the chain existed.")
    @command
    def verify(
        ctx: Any, start: int, checkpoint_out: Path | None, against: Path | None, seal: bool, *, as_json: bool
    ) -> None:
        """Recompute the log's hash chain and compare it with the stored hashes: prints the first broken
        position and exits 6 when the history was changed."""
        from engram.adapters.eventstore import chain_check

        app = ctx.engram.store.app
        sealed = chain_check.seal(app) if seal else 0
        verdict = chain_check.verify(app, start, _progress())
        if sys.stderr.isatty():
            click.echo("", err=True)
        checkpoint_ok: bool | None = None
        resealed = None
        if against is not None:
            checkpoint_ok = _matches(app, against)
            if not checkpoint_ok:  # rewritten by `keys seal` after the checkpoint? (ADR 0095)
                from engram.adapters.cli.keys_cmds import checkpoint_resealed

                resealed = checkpoint_resealed(ctx.engram, against)
        result = {
            **verdict.as_dict(start),
            "ok": verdict.ok and checkpoint_ok is not False,
            "sealed": sealed,
            "checkpoint_matches": checkpoint_ok,
            "checkpoint_resealed": resealed,
        }
        if checkpoint_out is not None and verdict.ok:
            checkpoint_out.write_text(
                json.dumps(
                    {
                        "format": CHECKPOINT_FORMAT,
                        "position": verdict.head_position,
                        "hash": verdict.head_hash,
                        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    },
                    indent=2,
                )
                + "\n"
            )
        if as_json:
            emit_json(result)
        else:
            _print(result, checkpoint_out)
        if not result["ok"]:
            if verdict.ok and resealed is not None and resealed["matched_before_seal"]:
                sys.exit(EXIT_RESEALED)  # not broken: rewritten by a declared seal after the checkpoint
            sys.exit(EXIT_BROKEN)


def _matches(app: Any, path: Path) -> bool:
    from engram.adapters.eventstore import chain_check

    try:
        checkpoint = json.loads(path.read_text())
        if checkpoint.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unknown format {checkpoint.get('format')!r}")
        position, expected = int(checkpoint["position"]), str(checkpoint["hash"])
    except (ValueError, KeyError, TypeError) as exc:
        fail_text(f"{path} is not an Engram checkpoint: {exc}", EXIT_CONFLICT)
    return chain_check.stored_hashes(app, [position]).get(position) == expected


def _print(result: dict[str, Any], checkpoint_out: Path | None) -> None:
    if result["sealed"]:
        click.echo(f"sealed {result['sealed']:,} events written before the chain existed")
    if result["broken_at"] is not None:
        click.echo(
            f"BROKEN at position {result['broken_at']}: {result['reason']} "
            f"(intact up to {result['head_position']}, {result['checked']:,} events checked)"
        )
    else:
        click.echo(
            f"chain intact: {result['checked']:,} events checked, head at position "
            f"{result['head_position']} hash {result['head_hash']}"
        )
    if result["unsealed"]:
        click.echo(
            f"{result['unsealed']:,} events not yet hashed (written before the chain): run with --seal"
        )
    if result["checkpoint_resealed"] is not None:
        from engram.adapters.cli.keys_cmds import print_resealed

        print_resealed(result["checkpoint_resealed"])
    elif result["checkpoint_matches"] is not None:
        click.echo("checkpoint matches" if result["checkpoint_matches"] else "checkpoint DOES NOT match")
    if checkpoint_out is not None and result["broken_at"] is None:
        click.echo(f"checkpoint written to {checkpoint_out}")
