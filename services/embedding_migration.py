"""Re-embedding every stored vector with another model: `engram embeddings migrate` (ADR 0071).

The texts come from the log (a node's scene and feeling, a note's text, the text a fact's vector was
of); each new vector is recorded as a `Reembedded` event of its item, which the views put in the new
model's collections, beside the live ones. Searches keep going to the collections of the configured
embedder's model until the switch. A run killed half way resumes where it stopped: the items left are
those whose vector is still of another model. Once none is left, `EmbeddingModels.Switched` records
the new model as the live one from its position on, and the views drop the other models'
collections. Messages have no vectors; no LLM is called.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from engram.domain.embedding_models import EMBEDDING_MODELS_ID, EmbeddingModels
from engram.domain.fact import Fact
from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.domain.scene import Scene
from engram.projections.reembedding import VIEWS, not_of_model, stored_models
from engram.services.ports import Embedder

log = structlog.get_logger("engram.services.embedding_migration")

KINDS = ("node", "note", "fact")
BATCH = 64
SAMPLE = 32
"""Texts embedded by a dry run to estimate the time the migration takes."""


@dataclass
class MigrationReport:
    to_model: str
    pending: dict[str, int]
    """Items per kind whose vector is of another model, before this run."""
    done: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    switched: bool = False
    dropped: list[str] = field(default_factory=list)
    """The models whose collections the switch dropped."""
    position: int | None = None
    """The log position of `Switched`: where the new model became the live one."""
    seconds: float = 0.0
    estimate_s: float | None = None
    """Dry run: the time the embedder would take, from a sample."""

    @property
    def total(self) -> int:
        return sum(self.pending.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "to_model": self.to_model,
            "pending": self.pending,
            "done": self.done,
            "switched": self.switched,
            "dropped": self.dropped,
            "position": self.position,
            "seconds": round(self.seconds, 3),
            "estimate_s": None if self.estimate_s is None else round(self.estimate_s, 1),
        }


Progress = Callable[[str, int, int], None]
"""(kind, items done of that kind, items pending of that kind)."""


class EmbeddingMigration:
    def __init__(self, engram: Any, embedder: Embedder) -> None:
        self.e = engram
        self.embedder = embedder

    @property
    def to_model(self) -> str:
        return self.embedder.model_id

    def pending(self) -> dict[str, list[tuple[UUID, UUID]]]:
        """Per kind, (being, item) of the items whose vector is of another model than the target."""
        self.e.views.ensure(names=VIEWS)
        return not_of_model(self.e.views.read, self.to_model)

    def stored_models(self) -> list[str]:
        self.e.views.ensure(names=VIEWS)
        return stored_models(self.e.views.read)

    def dry_run(self) -> MigrationReport:
        """What a run would do: the items per kind, and the time their embedding would take (the
        embedder's rate on a sample of them; nothing is written)."""
        pending = self.pending()
        report = MigrationReport(self.to_model, {k: len(v) for k, v in pending.items()})
        sample: list[str] = []
        for kind, items in pending.items():
            if len(sample) >= SAMPLE:
                break
            sample += self._texts(kind, items[: SAMPLE - len(sample)])[1]
        if sample:
            started = time.perf_counter()
            self.embedder.embed(sample)
            rate = len(sample) / max(time.perf_counter() - started, 1e-9)
            report.estimate_s = report.total / rate
        else:
            report.estimate_s = 0.0
        return report

    def run(
        self, *, progress: Progress | None = None, stop_after: int | None = None, batch: int = BATCH
    ) -> MigrationReport:
        """Re-embed what is pending; switch once nothing is. `stop_after`: stop after about that many
        items, without switching (what a kill does; a later run goes on)."""
        started = time.perf_counter()
        pending = self.pending()
        report = MigrationReport(self.to_model, {k: len(v) for k, v in pending.items()})
        models = self._models()
        others = [m for m in self.stored_models() if m != self.to_model]
        if (report.total or others) and models.start_migration(self.to_model, others, self.e.clock.now()):
            self.e.store.save(models)
        left = stop_after
        for kind in KINDS:
            items = pending[kind]
            for i in range(0, len(items), batch):
                if left is not None and left <= 0:
                    self.e.views.ensure(names=VIEWS)  # the new collections hold what was re-embedded
                    report.seconds = time.perf_counter() - started
                    return report
                part = items[i : i + batch if left is None else i + min(batch, left)]
                report.done[kind] += self._reembed(kind, part)
                if left is not None:
                    left -= len(part)
                if progress is not None:
                    progress(kind, min(i + len(part), len(items)), len(items))
        report.switched, report.dropped, report.position = self._switch()
        report.seconds = time.perf_counter() - started
        return report

    def _models(self) -> EmbeddingModels:
        found = self.e.store.find(EmbeddingModels, EMBEDDING_MODELS_ID)
        if found is None:
            return EmbeddingModels.register(self.e.clock.now())
        return found  # type: ignore[no-any-return]

    def _switch(self) -> tuple[bool, list[str], int | None]:
        if any(self.pending().values()):  # a patrol embedded with the old model meanwhile: run again
            return False, [], None
        models = self._models()
        dropped = [m for m in self.stored_models() if m != self.to_model]
        if not dropped and models.migrating != self.to_model:
            return False, [], None  # nothing of another model, and no migration to close
        if models.migrating != self.to_model:
            models.start_migration(self.to_model, dropped, self.e.clock.now())
        models.switch(self.to_model, dropped, self.e.clock.now())
        position = self.e.store.save(models)
        self.e.views.ensure(names=VIEWS)
        log.info("embedding_model_switched", model=self.to_model, dropped=dropped, position=position)
        return True, dropped, position

    def _texts(self, kind: str, items: Sequence[tuple[UUID, UUID]]) -> tuple[list[Any], list[str]]:
        """The aggregates of `items` still holding another model's vector, and the texts to embed."""
        aggs: list[Any] = []
        for being, ids in _by_being(items).items():
            aggs += self._load(kind, being, ids)
        return aggs, [_text(kind, a) for a in aggs]

    def _load(self, kind: str, being: UUID, ids: list[UUID]) -> list[Any]:
        cls: Any = {"node": MemoryNode, "note": Note, "fact": Fact}[kind]
        aggs = self.e.store.get_many(cls, ids, being_id=being)
        return [a for a in aggs if a.embedding is not None and a.embedding.model != self.to_model]

    def _reembed(self, kind: str, items: Sequence[tuple[UUID, UUID]]) -> int:
        return sum(
            self.e.runner.run(
                "reembed", functools.partial(self._reembed_one_being, kind, being, ids), being_id=being
            )
            for being, ids in _by_being(items).items()
        )

    def _reembed_one_being(self, kind: str, being: UUID, ids: list[UUID]) -> int:
        aggs = self._load(kind, being, ids)
        if not aggs:
            return 0
        vectors = self.embedder.embed([_text(kind, a) for a in aggs])
        at = self.e.clock.now()
        changed = []
        for agg, vector in zip(aggs, vectors, strict=True):
            # A fact's new vector is of the text its old one was of: a migration changes the model only.
            done = (
                agg.reembed(vector, at, agg.embedded_text or agg.text)
                if kind == "fact"
                else agg.reembed(vector, at)
            )
            if done:
                changed.append(agg)
        if changed:
            self.e.store.save(*changed)
        return len(changed)


def _by_being(items: Sequence[tuple[UUID, UUID]]) -> dict[UUID, list[UUID]]:
    out: dict[UUID, list[UUID]] = {}
    for being, item in items:
        out.setdefault(being, []).append(item)
    return out


def node_text(node: MemoryNode) -> str:
    """What a node's vector is of: its scene's `when` and action, and its feeling (as the patrol embeds)."""
    return Scene.model_validate(node.scene).embed_text(node.feeling)


def _text(kind: str, agg: Any) -> str:
    """The text the item's vector is of (what its first embedding embedded)."""
    if kind == "node":
        return node_text(agg)
    if kind == "note":
        return str(agg.text)
    # As `FactSearch._embed`: the type, the fact (the text the old vector was of) and its evidence.
    return f"{agg.fact_type}: {agg.embedded_text or agg.text} {agg.evidence or ''}".strip()
