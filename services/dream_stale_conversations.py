"""Stale conversation cleanup (spec 003 §3 step 6, issue #12): a dreaming step that closes the
being's idle sessions — those no message reached for the session gap (#10, ADR 0052) — so that
their session summaries come due, whatever the worker's conversation interval. The close is #10's
(`SessionClosed`, reason `idle`, the tick's clock reading as `seen_at`): a session closed already
is not closed again, so a re-run writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from engram.services.conversation_summaries import ConversationSummaries
from engram.services.sleep import StepContext, StepResult

BATCH = 100
"""Conversations looked at per tick."""


class StaleConversationsStep:
    name = "stale_conversations"
    phase = "dreaming"

    def __init__(self, summaries: Callable[[], ConversationSummaries], views: Callable[[], Any]) -> None:
        self._summaries = summaries
        self._views = views

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        self._views().ensure(names=["conversations"])
        closed = self._summaries().close_idle(ctx.now, being_id=being_id, limit=BATCH)
        return StepResult(done=closed, remaining=closed == BATCH)

    def pending(self, being_id: UUID) -> int | None:
        return None
