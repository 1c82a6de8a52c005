"""Settings of the HTTP API, from `ENGRAM_HTTP_*` environment variables (`engram serve` options override)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from engram.services.config import EnvSettings

MIB = 1024 * 1024


class HttpSettings(EnvSettings):
    env_prefix: ClassVar[str] = "ENGRAM_HTTP_"

    host: str = Field("127.0.0.1", description="Interface to bind; --no-auth requires a loopback one.")
    port: int = Field(8765, ge=0, le=65535)
    max_body_bytes: int = Field(MIB, ge=1024, le=64 * MIB, description="Largest request body accepted.")
    rate_limit_per_s: float = Field(
        50.0, gt=0, description="Sustained requests per second per token (token bucket refill rate)."
    )
    rate_limit_burst: int = Field(200, ge=1, description="Requests a token may send at once (bucket size).")
    token_refresh_s: float = Field(
        1.0, gt=0, description="How often a known token is re-checked, i.e. how soon a revocation bites."
    )
