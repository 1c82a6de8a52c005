"""`engram embeddings migrate --to MODEL`: re-embed every stored vector with another model (ADR 0071)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.domain.errors import InvalidInput
from engram.services.embedder_check import setting_for
from engram.services.embedding_migration import EmbeddingMigration, MigrationReport
from engram.services.ports import Embedder

TARGETS = "offline, e5-small, hashing, hashing:DIM, openai or openai:MODEL"


def target_embedder(spec: str, settings: Any) -> Embedder:
    """The embedder that `--to` names; the other settings (keys, base URL) are the configured ones."""
    kind, _, arg = spec.strip().partition(":")
    if kind == "hashing":
        from engram.adapters.embedders.hashing import HashingEmbedder

        if arg and not arg.isdigit():
            raise InvalidInput(f"--to {spec}: the hashing embedder's dimension must be a number")
        return HashingEmbedder(int(arg)) if arg else HashingEmbedder()
    if kind in ("offline", "e5-small") and not arg:
        from engram.adapters.embedders import build_embedder

        return build_embedder(settings.model_copy(update={"embedder": kind}))
    if kind == "openai":
        from engram.adapters.embedders import build_embedder

        update = {"embedder": "openai", **({"embedding_model": arg} if arg else {})}
        return build_embedder(settings.model_copy(update=update))
    raise InvalidInput(f"--to {spec}: unknown embedding model; choose {TARGETS}")


def _summary(report: MigrationReport, *, dry_run: bool) -> str:
    counts = ", ".join(f"{report.pending[k]} {k}s" for k in report.pending)
    if dry_run:
        return (
            f"to re-embed with {report.to_model}: {counts}; about {report.estimate_s or 0:.0f} s of embedding "
            "(from a sample); nothing written"
        )
    done = ", ".join(f"{report.done[k]} {k}s" for k in report.done)
    if not report.switched:
        if report.total == 0:
            return f"every stored vector is of {report.to_model} already: nothing to do"
        return f"re-embedded {done} with {report.to_model}; not switched yet: run the command again to go on"
    dropped = ", ".join(report.dropped) or "none"
    return (
        f"re-embedded {done} with {report.to_model} in {report.seconds:.1f} s; live from log position "
        f"{report.position}; dropped the collections of {dropped}. Searches use it from now on (the log "
        f"says which model is live); set {setting_for(report.to_model)} to match"
    )


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group("embeddings")
    def embeddings() -> None:
        """The embedding model of the stored vectors."""

    @embeddings.command("migrate")
    @click.option("--to", "to", required=True, metavar="MODEL", help=f"The new model: {TARGETS}.")
    @click.option("--dry-run", is_flag=True, help="Count what would be re-embedded and estimate the time.")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation (scripts).")
    @click.option("--batch", type=click.IntRange(1, 4096), default=64, show_default=True, hidden=True)
    @command
    def migrate(ctx: Any, to: str, dry_run: bool, yes: bool, batch: int, *, as_json: bool) -> None:
        """Re-embed every node, note and fact from the log with another model, into new collections
        beside the live ones (searches keep the live ones meanwhile); then switch and drop the old
        collections. Resumable: run it again after a stop. No LLM is called."""
        migration = EmbeddingMigration(ctx.engram, target_embedder(to, ctx.settings))
        if dry_run:
            report = migration.dry_run()
            emit_json(report.as_dict()) if as_json else click.echo(_summary(report, dry_run=True))
            return
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("this replaces every stored vector and drops the old ones: pass --yes")
            pending = {k: len(v) for k, v in migration.pending().items()}
            click.confirm(
                f"re-embed {sum(pending.values())} items with {migration.to_model} and drop the other "
                "models' vectors?",
                abort=True,
            )
        live = not as_json and sys.stderr.isatty()

        def progress(kind: str, done: int, total: int) -> None:
            if live:
                click.echo(f"\r{kind}s {done}/{total}\033[K", nl=False, err=True)

        report = migration.run(progress=progress, batch=batch)
        if live:
            click.echo("", err=True)
        emit_json(report.as_dict()) if as_json else click.echo(_summary(report, dry_run=False))
