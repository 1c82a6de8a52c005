"""Building the compacting phase's steps from an `Engram` (ADR 0061): `importance` then
`consolidation`, as `dream_steps.build_steps` lists them."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from engram.services.consolidation import ConsolidationStep
from engram.services.importance_scoring import ImportanceStep

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram


def importance_step(engram: Engram) -> ImportanceStep:
    def being_name(being_id: UUID) -> str:
        row = engram.views.read.being(being_id)
        return str(row["name"]) if row is not None else "assistant"

    return ImportanceStep(
        engram.store,
        engram.clock,
        engram.runner,
        lambda: engram.views,
        lambda: engram.llm if engram.llm.available else None,
        being_name,
        max_answer_bytes=engram.settings.llm_max_answer_kib * 1024,
    )


def consolidation_step(engram: Engram) -> ConsolidationStep:
    return ConsolidationStep(
        lambda: engram.views,
        lambda being: engram.patrol(being),
        lambda: engram.extraction,
        lambda: engram.summaries,
    )
