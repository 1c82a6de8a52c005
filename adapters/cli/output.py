"""How the CLI speaks: JSON on stdout with --json, readable text otherwise, errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

from engram.domain.errors import DomainError, InvalidInput, InvalidScene
from engram.services.config import ConfigurationError
from engram.services.errors import Conflict, NotFound, StorageFull

EXIT_INVALID = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_STORAGE_FULL = 5
EXIT_UNEXPECTED = 1

NO_LLM = "none (consolidation, splitting and the diary are skipped)"


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def exit_code_for(exc: DomainError) -> int:
    if isinstance(exc, StorageFull):  # not the command's fault: the same command works once space is freed
        return EXIT_STORAGE_FULL
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, Conflict):
        return EXIT_CONFLICT
    if isinstance(exc, InvalidInput):
        return EXIT_INVALID
    return EXIT_CONFLICT  # an invariant refused the command in the current state


def fail(exc: DomainError, *, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(
            json.dumps(
                {"error": exc.code, "message": exc.message, "details": exc.details},
                ensure_ascii=False,
                default=str,
            ),
            err=True,
        )
    elif isinstance(exc, ConfigurationError):
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
    elif isinstance(exc, InvalidScene):
        click.echo(f"error: {exc.message.split(':', 1)[0]}:", err=True)
        for err in exc.errors:
            click.echo(f"  - {err['field']}: {err['message']}", err=True)
    else:
        click.echo(f"error: {exc.message}", err=True)
    sys.exit(exit_code_for(exc))


def fail_text(message: str, code: int = EXIT_INVALID) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def warn_if_embedder_changed(engram: Any) -> None:
    """A warning on stderr when the stored node vectors were made by another embedder (#7, item 14)."""
    from engram.services.embedder_check import embedder_mismatch

    mismatch = embedder_mismatch(engram)
    if mismatch is not None:
        click.echo(f"warning: {mismatch.message()}", err=True)


def plain_reason(reason: str) -> str:
    """A patrol step's skip reason as the user reads it; the stored one keeps the spec's words."""
    from engram.services.patrol.run import KEY_MISSING  # here: the patrol's modules load only to patrol

    if reason == KEY_MISSING:
        return "no LLM key is set (ENGRAM_ANTHROPIC_API_KEY or ENGRAM_OPENAI_API_KEY)"
    return reason
