"""`engram serve` (the HTTP API) and `engram token create|list|revoke` (its bearer tokens)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from typing import Any

import click

from engram.adapters.cli.output import emit_json
from engram.domain.errors import InvalidInput


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _start_embedded_worker(engram: Any, wanted: bool | None) -> Any:
    """The projections and automatic patrols in a background thread of the server.

    The embedded deployment keeps its worker inside the server by default (one process to run; an
    `engram worker` beside `serve --no-worker` works too); with a Qdrant server a separate
    `engram worker` is the usual layout.
    """
    import threading

    from engram.services.patrol.auto import AutoPatrol
    from engram.services.worker import Worker

    settings = engram.settings
    if wanted is None:
        wanted = settings.qdrant_url is None
    if not wanted:
        return None
    auto = AutoPatrol(engram) if settings.auto_patrol else None
    worker = Worker(
        engram.views,
        poll_interval=settings.worker_poll_interval_s,
        on_idle=auto.tick if auto else None,
        note_sweep=engram.note_expiry.sweep,
        note_maintenance=engram.note_maintenance.run,
        note_embedding=engram.packing.embed_pending,
        fact_embedding=engram.fact_search.embed_pending,
        journal_refresh=engram.journals.refresh_due,
        conversations=engram.summaries.worker_round,
        extraction=engram.extraction.worker_round,
        sleep=engram.sleep.worker_round,
    )
    engram.store.on_saved.append(lambda _position: worker.wakeup.notify())
    threading.Thread(target=worker.run_forever, name="embedded-worker", daemon=True).start()
    return worker


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    """Adds this module's commands to `cli`; `command` adds --json and error handling."""

    @cli.command("serve")
    @click.option("--host", default=None, help="Interface to bind (ENGRAM_HTTP_HOST, default 127.0.0.1).")
    @click.option(
        "--port", type=click.IntRange(0, 65535), default=None, help="ENGRAM_HTTP_PORT, default 8765."
    )
    @click.option(
        "--no-auth",
        is_flag=True,
        help="Development only: no tokens, every caller is an admin. Refused unless bound to loopback.",
    )
    @click.option("--max-body-bytes", type=click.IntRange(1024), default=None, help="Default 1 MiB.")
    @click.option(
        "--rate-limit",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Requests/s per token.",
    )
    @click.option("--rate-burst", type=click.IntRange(1), default=None, help="Burst size per token.")
    @click.option(
        "--worker/--no-worker",
        "embedded_worker",
        default=None,
        help="Keep the views current and patrol automatically inside this process "
        "(default: on for the embedded deployment, off with a Qdrant server, where `engram worker` runs).",
    )
    @command
    def serve(
        ctx: Any,
        host: str | None,
        port: int | None,
        no_auth: bool,
        max_body_bytes: int | None,
        rate_limit: float | None,
        rate_burst: int | None,
        embedded_worker: bool | None,
        *,
        as_json: bool,
    ) -> None:
        """Serve the HTTP API (/v1, OpenAPI at /openapi.json) until Ctrl-C.

        It holds the embedded vector index while it runs: the CLI, `engram mcp` and `engram worker`
        reach it through this process.
        """
        from engram.adapters.cli.admin import log_embedder_mismatch
        from engram.adapters.http import HttpSettings, create_app
        from engram.adapters.logging import configure_logging
        from engram.adapters.process_memory import limit_malloc_arenas
        from engram.services.config import load_model_settings

        limit_malloc_arenas()  # before the request threads allocate (ADR 0028)

        overrides: dict[str, Any] = {
            k: v
            for k, v in {
                "host": host,
                "port": port,
                "max_body_bytes": max_body_bytes,
                "rate_limit_per_s": rate_limit,
                "rate_limit_burst": rate_burst,
            }.items()
            if v is not None
        }
        http = load_model_settings(HttpSettings, **overrides)
        if no_auth and not is_loopback(http.host):
            raise InvalidInput(
                f"--no-auth serves without tokens, so it binds only to a loopback address "
                f"(127.0.0.1, ::1 or localhost), not {http.host!r}; create a token with "
                "`engram token create` instead"
            )
        settings = ctx.settings
        # A server logs one line per request at info: the default level, unless set explicitly.
        level = settings.log_level if "ENGRAM_LOG_LEVEL" in os.environ else "info"
        # uvicorn's own lines ("Started server process", errors) in the same format as Engram's.
        configure_logging(level, settings.log_format, library_loggers=("uvicorn",))
        import uvicorn

        from engram.adapters.vectors import hold_vector_index

        hold_vector_index(ctx.engram.views.vector_index)  # the embedded index's owner while it runs
        app = create_app(ctx.engram, settings=http, auth=not no_auth)
        worker = _start_embedded_worker(ctx.engram, embedded_worker)
        log_embedder_mismatch(ctx.engram)
        mode = "WITHOUT AUTHENTICATION (development mode)" if no_auth else "bearer tokens required"
        click.echo(f"engram: serving http://{http.host}:{http.port}/v1 — {mode}; Ctrl-C stops", err=True)
        uvicorn.run(
            app,
            host=http.host,
            port=http.port,
            access_log=False,  # one structured line per request comes from the app itself
            log_config=None,  # its loggers were routed through structlog above
            log_level="warning" if level in ("warning", "error") else "info",
            server_header=False,
            timeout_graceful_shutdown=30,
        )
        if worker is not None:
            worker.stop_event.set()

    @cli.group()
    def token() -> None:
        """Create, list and revoke the HTTP API's bearer tokens."""

    @token.command("create")
    @click.option("--being", "being_ref", metavar="BEING", help="A token that reaches this being only.")
    @click.option("--admin", is_flag=True, help="A token that reaches every being and the admin endpoints.")
    @click.option("--label", default="", help="A note for whoever lists the tokens, e.g. the client's name.")
    @command
    def token_create(ctx: Any, being_ref: str | None, admin: bool, label: str, *, as_json: bool) -> None:
        """Issue a token. It is shown once: only its hash is stored."""
        from engram.services.tokens import TokenService

        if bool(being_ref) == admin:
            raise InvalidInput("give --being BEING or --admin")
        issued = TokenService(ctx.engram).issue(being=being_ref, admin=admin, label=label)
        if as_json:
            emit_json(issued.model_dump())
            return
        scope = "an admin token" if admin else f"a token for being {issued.being}"
        click.echo(f"created {scope}: id {issued.id}, prefix {issued.prefix}")
        click.echo("the token is shown only now; store it somewhere safe:", err=True)
        click.echo(issued.token)

    @token.command("list")
    @click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
    @command
    def token_list(ctx: Any, include_revoked: bool, *, as_json: bool) -> None:
        """Tokens by id, prefix, scope, being and label (never the token itself)."""
        from engram.services.tokens import TokenService

        tokens = TokenService(ctx.engram).list(include_revoked=include_revoked)
        if as_json:
            emit_json([t.model_dump() for t in tokens])
            return
        if not tokens:
            click.echo("no tokens yet: engram token create --being NAME (or --admin)")
        for t in tokens:
            who = "admin" if t.scope == "admin" else f"being {t.being or t.being_id}"
            revoked = f"  REVOKED {t.revoked_at}" if t.revoked else ""
            label = f"  {t.label}" if t.label else ""
            click.echo(f"{t.id}  {t.prefix}…  {who:<24} {t.issued_at}{label}{revoked}")

    @token.command("revoke")
    @click.argument("ref", metavar="ID_OR_PREFIX")
    @click.option("--reason", default="", help="Why, for the audit trail.")
    @command
    def token_revoke(ctx: Any, ref: str, reason: str, *, as_json: bool) -> None:
        """Revoke a token by id or listed prefix; a running server stops accepting it within a second."""
        from engram.services.tokens import TokenService

        done = TokenService(ctx.engram).revoke(ref, reason)
        if as_json:
            emit_json(done.model_dump())
        elif done.details.get("already_revoked"):
            click.echo(f"token {done.details['id']} was already revoked")
        else:
            click.echo(f"revoked token {done.details['id']}")
