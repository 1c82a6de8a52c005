"""Which embedding model the log says is live (ADR 0079), and what to say when the configuration differs.

After `engram embeddings migrate` (ADR 0071) the log records `EmbeddingModels.Switched`: every stored
vector is of that model from that position on. Queries must be embedded with the same model, or they
find nothing by meaning, so the log decides, not `ENGRAM_EMBEDDER`: the configuration only picks the
model of a deployment that never migrated (a fresh one) and the target of a migration.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.domain.embedding_models import EMBEDDING_MODELS_ID, EmbeddingModels
from engram.services.store import AggregateStore


@dataclass(frozen=True)
class LiveModel:
    model: str
    position: int
    """The log position of the `Switched` event from which `model` is live."""

    def ignored_message(self, configured: str) -> str:
        return (
            f"the configured embedder ({configured}) is ignored: the log says {self.model} is the live "
            f"embedding model since position {self.position} (engram embeddings migrate); queries are "
            f"embedded with {self.model}. Configure it to silence this warning, or migrate to "
            f"{configured} with `engram embeddings migrate`"
        )

    def unbuildable_message(self, reason: str) -> str:
        return (
            f"the log says {self.model} is the live embedding model since position {self.position} "
            f"(engram embeddings migrate), but this deployment cannot build it: {reason}. Give it what "
            "it needs, or re-embed with a model it can build: engram embeddings migrate --to offline"
        )


def live_model(store: AggregateStore) -> LiveModel | None:
    """The model of the log's last `Switched`, or None when the deployment never migrated."""
    models = store.find(EmbeddingModels, EMBEDDING_MODELS_ID)
    if models is None or models.live is None:
        return None
    events = store.events(EMBEDDING_MODELS_ID)
    version = max(e.originator_version for e in events if isinstance(e, EmbeddingModels.Switched))
    return LiveModel(models.live, store.positions(EMBEDDING_MODELS_ID)[version])
