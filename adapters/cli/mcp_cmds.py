"""`engram mcp --being NAME`: serve one being's memory to an MCP client over stdio."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("mcp")
    @click.option(
        "--being", "being_ref", required=True, help="The being (name or id) whose memory is served."
    )
    @command
    def mcp(ctx: Any, being_ref: str, *, as_json: bool) -> None:
        """Serve BEING's memory over stdio (Model Context Protocol) until the client disconnects.

        Tools: recall, recall_memory, search_memory, query, note_scene, context — all for this being
        only. stdout carries the protocol; logs go to stderr (ENGRAM_LOG_LEVEL). Runs beside
        `engram serve`, `engram worker` and the CLI on the same data directory.
        """
        from engram.adapters.mcp import serve_stdio
        from engram.adapters.vectors import hold_vector_index
        from engram.services.bootstrap import Engram, bootstrap

        def open_engram() -> Engram:
            engram = bootstrap(ctx.settings)
            try:
                hold_vector_index(engram.views.vector_index)  # the embedded index's owner while it runs
            except BaseException:
                engram.close()
                raise
            return engram

        serve_stdio(open_engram, being_ref)
