"""CLI commands (registered by adapters/cli/main.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""
