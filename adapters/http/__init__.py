"""The HTTP API (`engram serve`): FastAPI under `/v1`, bearer tokens, problem-details errors."""

from engram.adapters.http.app import create_app
from engram.adapters.http.config import HttpSettings

__all__ = ["HttpSettings", "create_app"]
