"""A keyword embedder for fact-search tests: each known word is one axis, so cosines are exact."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np

from engram.domain.embedding import Embedding
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import FactInput
from engram.services.config import Settings
from tests.support import SeededIds, SteppingClock

AXES = ("garden", "music", "john", "work", "coffee", "austin")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)


class KeywordEmbedder:
    """One axis per word of `AXES` found in the text (normalised); no keyword: a vector of its own."""

    model_id = "keywords-6"
    dim = len(AXES) + 1

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        self.texts += texts
        out = []
        for text in texts:
            low = text.casefold()
            v = np.array([1.0 if a in low else 0.0 for a in AXES] + [0.0], dtype=np.float32)
            if not v.any():
                v[-1] = 1.0
            v /= np.linalg.norm(v)
            out.append(Embedding.from_floats(self.model_id, [float(x) for x in v]))
        return out


def open_engram(
    make_settings: Callable[..., Settings], clock: SteppingClock, embedder: KeywordEmbedder
) -> Engram:
    """An engram with the keyword embedder and beings Aria and Bo."""
    e = bootstrap(make_settings(), clock=clock, ids=SeededIds(), embedder=embedder)
    e.beings.register("Aria")
    e.beings.register("Bo")
    return e


def add(e: Engram, text: str, *, being: str = "Aria", space: str | None = None, **kw: object) -> str:
    kw.setdefault("subject", "mina")
    written = e.facts.state(being, FactInput(text=text, **kw), space=space)  # type: ignore[arg-type]
    return str(written.fact_id)
