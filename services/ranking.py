"""Ranking profiles for `query`: how semantic, lexical, importance and recency combine.

`weighted` adds normalised scores with the profile's weights (the spec-001 formula). `rrf` fuses the
semantic and lexical *ranks* (reciprocal rank fusion, k = 60) and adds small importance and recency
terms: ranks are comparable across signals where raw scores (cosine vs bm25) are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from domain.errors import InvalidInput


@dataclass(frozen=True)
class Profile:
    name: str
    fusion: Literal["weighted", "rrf"]
    semantic: float
    lexical: float
    importance: float
    recency: float
    channel: float = 0.0
    rrf_k: int = 60
    recency_days: float = 45.0
    candidates: int = 100
    """How many candidates each signal contributes before fusion."""
    neighbours: float = 0.0
    """Weight of the best score among the same source's neighbouring memories (ADR 0008)."""


PROFILES: dict[str, Profile] = {
    "default": Profile("default", "rrf", semantic=1.0, lexical=1.0, importance=0.002, recency=0.0),
    # spec 001: 0.50·semantic + 0.28·lexical + 0.10·confidence + 0.07·recency + 0.05·channel
    "spec-001": Profile(
        "spec-001", "weighted", semantic=0.50, lexical=0.28, importance=0.10, recency=0.07, channel=0.05
    ),
    "semantic": Profile("semantic", "weighted", semantic=1.0, lexical=0.0, importance=0.0, recency=0.0),
    "lexical": Profile("lexical", "weighted", semantic=0.0, lexical=1.0, importance=0.0, recency=0.0),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidInput(f"unknown profile {name!r}; profiles are {', '.join(PROFILES)}") from None
