"""The HTTP API (`engram serve`): FastAPI under `/v1`, bearer tokens, problem-details errors.

`create_app` is imported on first use: FastAPI and its web stack are for `engram serve`, while every
CLI command reads `HttpSettings`' variable names to check the environment.
"""

from typing import TYPE_CHECKING, Any

from engram.adapters.http.config import HttpSettings

if TYPE_CHECKING:
    from engram.adapters.http.app import create_app

__all__ = ["HttpSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from engram.adapters.http.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
