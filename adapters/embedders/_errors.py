"""Errors of the embedder adapters that are not in the port.

Kept in their own module so that the adapters can raise them without
importing the package `__init__`, which imports the adapters.
"""

from __future__ import annotations


class EmbedderConfigError(ValueError):
    """The embedder is misconfigured (missing key, unknown model, bad parameter)."""
