"""Ranking profiles for `query`: how semantic, lexical, dates, neighbours, importance and recency combine.

`weighted` adds normalised scores with the profile's weights (the spec-001 formula). `rrf` fuses the
semantic and lexical *ranks* (reciprocal rank fusion, k = 60). `scaled` (the default, ADR 0008) puts
both channels on [0, 1] within the query's own candidates — bm25 over its best, raised to
`lexical_power`; cosine min–max over the semantic candidates — adds a date term when the query names
dates, then lets the best memories pass a share of their score to their neighbours in the order the
memories were noted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engram.domain.errors import InvalidInput


@dataclass(frozen=True)
class Profile:
    name: str
    fusion: Literal["weighted", "rrf", "scaled"]
    semantic: float
    lexical: float
    importance: float
    recency: float
    channel: float = 0.0
    rrf_k: int = 60
    recency_days: float = 45.0
    candidates: int = 100
    """How many candidates each signal contributes before fusion."""
    lexical_power: float = 1.0
    """`scaled`: bm25 / best bm25 is raised to this power (> 1 favours the clear lexical winners)."""
    dates: float = 0.0
    """Weight of the closeness between the dates a query names and a memory's `when` (ADR 0008)."""
    date_days: float = 3.0
    """Closeness is exp(−days apart / date_days)."""
    neighbours: float = 0.0
    """Share of a memory's score passed to the memories noted just before and after it on the same day."""
    neighbour_radius: int = 2
    neighbour_decay: float = 1 / 3
    """The share shrinks by this factor per step away from the memory."""
    neighbour_seeds: int = 20
    """How many of the best memories pass a share to their neighbours."""
    answers: float = 0.0
    """Share a memory that asks a question passes to the memory noted after it (its answer)."""
    question_penalty: float = 0.0
    """A memory that asks a question keeps (1 − this) of its own score."""
    actors_apart: bool = True
    """Names of the being's actors match the actors field only, and leave the semantic query."""


PROFILES: dict[str, Profile] = {
    "default": Profile(
        "default",
        "scaled",
        semantic=0.5,
        lexical=1.0,
        importance=0.002,
        recency=0.0,
        lexical_power=2.0,
        dates=0.4,
        neighbours=0.3,
        answers=0.8,
        question_penalty=0.1,
    ),
    "rrf": Profile("rrf", "rrf", semantic=1.0, lexical=1.0, importance=0.002, recency=0.0),
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
