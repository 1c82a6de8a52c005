"""The views' part of forgetting an item or a subject (ADR 0089): the erased aggregates' rows deleted
in place (`ViewPurge.purge_items`, ADR 0077) instead of every view rebuilt.

An item's key id is its aggregate's id (a note, a message, a fact, a node made from a note, a
conversation: `adapters/eventstore/key_choice.py`), so the destroyed keys name the aggregates whose
rows go; a conversation's sessions and summaries are found by their `conversation_id`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from engram.services.conversation_purge import recompute_conversation
from engram.services.erasure_counters import REBUILT_AFTER_ITEMS

if TYPE_CHECKING:
    from engram.services.erasure import Forgetting

Progress = Callable[[str, int, int], None]


def purge_items(
    f: Forgetting,
    being_id: UUID,
    key_ids: Sequence[UUID],
    progress: Progress | None,
    *,
    conversations: Sequence[UUID] = (),
) -> dict[str, int]:
    """Purge the views of what the destroyed keys sealed; the counts for the receipt.
    `conversations`: a forgotten message's, whose rows are then recomputed in place (its last user
    message, its summaries and their due work from the events left: ADR 0093)."""
    if f.purge is None:
        # ADR 0073's way (kept for `engram bench erasure --items` to compare): every view rebuilt,
        # the erased events read as erased and no projection handles them.
        return {"views_rebuilt": len(f.views().rebuild_all(progress=progress))}
    report = f.purge.purge_items(being_id, key_ids, progress=progress)
    views = f.views()
    # Counters not taken out in place (BM25's message count): those views rebuilt, when touched.
    counted = [name for name in REBUILT_AFTER_ITEMS if name in report.rows and name not in report.rebuilt]
    if counted:
        views.rebuild_all(counted)
    touched = [table for c in conversations for table in recompute_conversation(f, c)]
    rewritten = f.purge.scrub.scrub_tables(touched) if touched else []
    return {
        "view_rows": report.row_count,
        "vector_points": report.point_count,
        "views_rebuilt": len(report.rebuilt) + len(counted),
        "tables_rewritten": len(report.scrubbed) + len(rewritten),
    }
