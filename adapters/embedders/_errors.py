"""Errors of the embedder adapters that are not in the port.

Kept in their own module so that the adapters can raise them without
importing the package `__init__`, which imports the adapters.
"""

from __future__ import annotations

from engram.services.config import ConfigurationError


class EmbedderConfigError(ConfigurationError):  # a ValueError too, through InvalidInput
    """The embedder is misconfigured (missing key, unknown model, bad parameter)."""
