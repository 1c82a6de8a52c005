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
    steps: list[DreamStep] = []
    steps += [LinksStep(engram), LinkCleanupStep(engram)]  # dreaming 1: A-MEM links (ADR 0062)
    return steps
