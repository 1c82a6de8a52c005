"""The FastAPI application: `create_app(engram)` wires routes, errors, auth, limits and logging."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import structlog
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from engram.adapters.http import problems
from engram.adapters.http.config import HttpSettings
from engram.adapters.http.erasure_item_routes import erasure_item_routes
from engram.adapters.http.erasure_routes import erasure_routes
from engram.adapters.http.fact_routes import facts, spaces_admin
from engram.adapters.http.fact_search_routes import fact_search
from engram.adapters.http.keys_routes import keys_routes
from engram.adapters.http.link_routes import link_routes
from engram.adapters.http.message_routes import messages
from engram.adapters.http.middleware import Authenticate, BodyGuard, RequestLog, TokenBuckets
from engram.adapters.http.profile_routes import profile_routes
from engram.adapters.http.routes import _version, admin, public, v1
from engram.adapters.http.sleep_routes import sleep_routes
from engram.adapters.http.undo_routes import undo_routes
from engram.adapters.http.verify_routes import verify_routes
from engram.adapters.http.why_routes import why_routes
from engram.adapters.ui import ui_router
from engram.adapters.ui.routes import mount_static
from engram.services.bootstrap import Engram
from engram.services.errors import ConsistencyTimeout
from engram.services.tokens import DEV_ADMIN, TokenService

log = structlog.get_logger("engram.http")

DESCRIPTION = """\
Event-sourced long-term memory for AI agents.

Every `/v1` endpoint except `/v1/health` needs `Authorization: Bearer <token>`: a being token
(`engram token create --being NAME`) reaches that being only; an admin token (`--admin`) reaches
every being and `/v1/admin`. A being is addressed by name or id. Errors are RFC 9457 problem
details (`application/problem+json`) with Engram's `code`. See `adapters/http/README.md`.
"""

DOCS_ASSETS = "/docs/assets"


def _warm_up(engram: Engram) -> None:
    """Open the views and the vector index, build the embedder: the first request should not pay.
    A view that cannot serve yet (ahead of the log until the worker rebuilds it) does not keep the
    server from starting: its reads say why, and `/v1/health` shows it."""
    try:
        engram.views.ensure()
    except ConsistencyTimeout as exc:
        log.warning("views not ready at start", reason=str(exc))
    _ = engram.embedder


def create_app(
    engram: Engram,
    *,
    settings: HttpSettings | None = None,
    auth: bool = True,
    close_on_shutdown: bool = False,
    warm_up: bool = True,
) -> FastAPI:
    """The API over one `Engram`. With `auth=False` every caller is an admin (development only)."""
    settings = settings or HttpSettings()
    tokens = TokenService(engram, refresh_s=settings.token_refresh_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if warm_up:
            await anyio.to_thread.run_sync(_warm_up, engram)
        # The warm-up upgraded the views whose schema changed; from here on no request rebuilds one:
        # a view still to upgrade answers `view_upgrading` until the worker has done it (ADR 0050).
        engram.views.rebuild_on_read = False
        try:
            yield
        finally:
            if close_on_shutdown:
                engram.close()

    # Swagger UI with its script, style sheet and icon served by this app (`/docs/assets/…`, shipped in
    # the `fastapi-offline` package): FastAPI's own /docs loads them from a CDN, blank without a network.
    app = FastAPIOffline(
        title="Engram",
        version=_version(),
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
        lifespan=lifespan,
        strict_content_type=False,
    )
    app.state.engram = engram
    app.state.tokens = tokens
    app.state.ui_dev_principal = None if auth else DEV_ADMIN
    app.include_router(public)
    app.include_router(messages)  # before v1: its `/beings/{being}/{kind}/{item_id}` would take them
    app.include_router(fact_search)  # before the facts router: its /facts/{id} would take /facts/search
    app.include_router(facts)  # before v1, as messages
    app.include_router(sleep_routes)  # before v1, as messages
    app.include_router(profile_routes)  # before v1, as messages
    app.include_router(link_routes)  # before v1, as messages
    app.include_router(why_routes)  # before v1, as messages
    app.include_router(undo_routes)  # before v1, as messages
    app.include_router(verify_routes)  # before v1, as messages
    app.include_router(erasure_routes)  # before v1, as messages
    app.include_router(erasure_item_routes)  # before v1, as messages
    app.include_router(keys_routes)  # before v1, as messages
    app.include_router(v1)
    app.include_router(admin)
    app.include_router(spaces_admin)
    app.include_router(ui_router)  # the memory explorer's pages (ADR 0084); not part of the API
    mount_static(app)
    app.state.api_routes = [
        *public.routes,
        *messages.routes,
        *fact_search.routes,
        *facts.routes,
        *v1.routes,
        *admin.routes,
        *spaces_admin.routes,
        *erasure_routes.routes,
        *erasure_item_routes.routes,
    ]
    problems.install(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            problems.add_problem_schemas(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    # Added innermost first: RequestLog wraps Authenticate wraps BodyGuard wraps the routes.
    app.add_middleware(BodyGuard, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(
        Authenticate,
        verify=tokens.verify if auth else None,
        buckets=TokenBuckets(settings.rate_limit_per_s, settings.rate_limit_burst),
        public={"/v1/health"},
        dev_principal=None if auth else DEV_ADMIN,
    )
    app.add_middleware(RequestLog)
    return app
