"""The last dreaming steps — episodic pruning, stale conversations, compaction — and the awake step
of the emergency compaction (issue #12, ADRs 0066, 0067), in their order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.domain.compaction import EMERGENCY_THRESHOLD as EMERGENCY
from engram.domain.compaction import SLEEP_THRESHOLD as SLEEP
from engram.services.dream_compaction import CompactionStep
from engram.services.dream_pruning import PruningStep
from engram.services.dream_stale_conversations import StaleConversationsStep
from engram.services.sleep import DreamStep

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram


def tidying_steps(engram: Engram) -> list[DreamStep]:
    s = engram.settings
    return [
        PruningStep(
            engram.store, engram.runner, lambda: engram.views, s.prune_after_days, s.prune_max_poignancy
        ),
        StaleConversationsStep(lambda: engram.summaries, lambda: engram.views),
        CompactionStep(engram, name="compaction", phase="dreaming", threshold=SLEEP, trigger="sleep"),
        CompactionStep(
            engram, name="emergency_compaction", phase="awake", threshold=EMERGENCY, trigger="emergency"
        ),
    ]
