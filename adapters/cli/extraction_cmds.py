"""`engram facts extract BEING`: fact extraction from the messages not read yet, now (ADR 0058)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.fact_cmds import facts_group
from engram.adapters.cli.output import emit_json
from engram.services.fact_extraction import ExtractionProgress, ExtractionReport


def report_text(r: ExtractionReport) -> str:
    return r.text()


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds `engram facts extract` to `cli`; `command` adds --json and error handling."""

    @facts_group(cli).command("extract")
    @click.argument("being_ref", metavar="BEING")
    @command
    def extract(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """Extract facts from BEING's messages not read yet, now (what the worker does every
        ENGRAM_EXTRACTION_INTERVAL_S). Without an LLM, records once that they were skipped."""

        def progress(p: ExtractionProgress) -> None:
            if not as_json and sys.stderr.isatty():
                click.echo(f"\r{p.done}/{p.total} messages", nl=False, err=True)

        report = ctx.engram.extraction.run_until_done(being_ref, progress=progress)
        if not as_json and sys.stderr.isatty():
            click.echo("", err=True)
        if as_json:
            emit_json(report.as_dict())
        else:
            click.echo(report_text(report))
