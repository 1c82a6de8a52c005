"""Similarity thresholds per embedder (ADR 0006).

The spec's numbers (0.45 to join a cluster, 0.35 to recall) are for OpenAI's
text-embedding-3-small; cosine scales differ per model, so each embedder has its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.domain.links import LINK_THRESHOLD


@dataclass(frozen=True)
class Thresholds:
    cluster: float
    """A node joins a sub-cluster (❶), nodes are mutually similar (sub-cluster birth), siblings merge (❼)."""
    recall: float
    """`recall` returns nodes above this score."""
    merge: float
    """An LLM's merge (❹) is applied only if every absorbed node is at least this similar to its survivor
    (ADR 0027): above most pairs of unrelated memories, below paraphrases of one event."""
    link: float = LINK_THRESHOLD
    """Dreaming links two memories at least this similar (A-MEM, spec 003; ADR 0062)."""


SPEC = Thresholds(cluster=0.45, recall=0.35, merge=0.40)
MINILM = Thresholds(cluster=0.45, recall=0.40, merge=0.50)
HASHING = Thresholds(cluster=0.30, recall=0.20, merge=0.25)
# multilingual-e5-small scores everything high (unrelated LoCoMo turns: median 0.88). Each value sits
# at the quantile of random turn pairs (question-turn pairs for recall) where MiniLM's sits (ADR 0080).
E5 = Thresholds(cluster=0.87, recall=0.83, merge=0.88, link=0.93)


def thresholds_for(model_id: str) -> Thresholds:
    if model_id.startswith("minilm"):
        return MINILM
    if model_id.startswith("e5-small"):
        return E5
    if model_id.startswith("hashing"):
        return HASHING
    return SPEC
