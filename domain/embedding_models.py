"""Which embedding model the deployment's vectors are of, and its migrations (ADR 0071).

One aggregate per deployment. `MigrationStarted` records that `engram embeddings migrate` began to
re-embed the stored texts with another model (the `Reembedded` events of nodes, notes and facts follow
it, resumable: each item is re-embedded once); `Switched` records that every stored vector is now of
`model` and that the collections of the other models are dropped. The log position of `Switched` is
the position from which `model` is the live one.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidTransition
from engram.domain.ids import ENGRAM_NAMESPACE

DEPLOYMENT = UUID(int=0)
"""The `being_id` of records that belong to the deployment, not to one being."""

EMBEDDING_MODELS_ID = uuid5(ENGRAM_NAMESPACE, "embedding-models")


class EmbeddingModels(BeingScopedAggregate):
    TOPIC = "engram.EmbeddingModels"

    class Event(Aggregate.Event):
        TOPIC = "engram.EmbeddingModels.Event"
        being_id: UUID

    class Registered(Event, Aggregate.Created):
        TOPIC = "engram.EmbeddingModels.Registered"
        class_version = 1

    class MigrationStarted(Event):
        TOPIC = "engram.EmbeddingModels.MigrationStarted"
        class_version = 1
        to_model: str
        from_models: list[str]

        def apply(self, agg: EmbeddingModels) -> None:
            agg.migrating = self.to_model

    class Switched(Event):
        """Every stored vector is of `model` now; the other models' collections go."""

        TOPIC = "engram.EmbeddingModels.Switched"
        class_version = 1
        model: str
        dropped: list[str]

        def apply(self, agg: EmbeddingModels) -> None:
            agg.live = self.model
            agg.migrating = None
            agg.history.append(self.model)

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.live: str | None = None
        self.migrating: str | None = None
        self.history: list[str] = []

    @classmethod
    def register(cls, at: datetime) -> EmbeddingModels:
        return cls._create(cls.Registered, id=EMBEDDING_MODELS_ID, being_id=DEPLOYMENT, timestamp=at)

    def start_migration(self, to_model: str, from_models: list[str], at: datetime) -> bool:
        """Record the start of a migration to `to_model`; False when it is the one under way (a resume)."""
        if self.migrating == to_model:
            return False
        self._emit(self.MigrationStarted, at, to_model=to_model, from_models=sorted(from_models))
        return True

    def switch(self, model: str, dropped: list[str], at: datetime) -> None:
        if self.migrating != model:
            raise InvalidTransition(f"no migration to {model} is under way: nothing to switch to")
        self._emit(self.Switched, at, model=model, dropped=sorted(dropped))
