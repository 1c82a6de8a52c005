"""The steps of sleep's phases, in the order a tick runs them (spec 003 §3, issue #12, ADR 0060).

`compacting`: importance scoring, consolidation of what is unprocessed. `dreaming`: A-MEM links and
their cleanup, entity profiles, reflection, episodic pruning, stale conversations, pre-compaction
extraction and context compaction. `awake`: the emergency compaction. Each step's module owns its
behaviour; this list owns only their order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.services.memory_links import LinkCleanupStep, LinksStep
from engram.services.sleep import DreamStep

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram


def build_steps(engram: Engram) -> list[DreamStep]:
    from engram.services.consolidation_wiring import consolidation_step, importance_step

    steps: list[DreamStep] = []
    steps += [importance_step(engram), consolidation_step(engram)]  # compacting (ADR 0061)
    steps += [LinksStep(engram), LinkCleanupStep(engram)]  # dreaming 1: A-MEM links (ADR 0062)
    # Entity profiles and reflection (ADR 0064, 0065), after the links steps.
    from engram.services.entity_profiles import EntityConsolidation, EntityObservations
    from engram.services.reflection import ReflectionStep

    steps += [EntityObservations(engram), EntityConsolidation(engram), ReflectionStep(engram)]
    from engram.services.dream_tidying import tidying_steps

    steps += tidying_steps(engram)  # pruning, stale conversations, compaction; awake: emergency (0066, 0067)
    return steps
