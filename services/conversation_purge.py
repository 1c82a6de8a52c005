"""A forgotten message's conversation, recomputed in place in the conversations view (ADR 0093).

Forgetting a message erases the summaries that cover it and changes the conversation's last user
message: the conversation's rows (its state, its sessions, its summaries) are deleted and its events
applied again, in the view's write transaction at the position the view has reached, as a rebuild of
the view would give them; the erased events read as `ErasedContent` and are left out. The last user
message is the latest remaining user message among the view's rows, as `Message.Received` sets it.
Its cost follows the conversation, not the deployment (every view rebuilt would follow the log).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from engram.domain.conversation import LAST_USER_MESSAGE_CHARS, Conversation
from engram.domain.message import Role, clean_message_text
from engram.projections.engine import batches, tracking
from engram.services.errors import Conflict

if TYPE_CHECKING:
    from engram.services.erasure import Forgetting

CONVERSATIONS_VIEW = "conversations"
_BY_CONVERSATION = {
    "conversations": "id",
    "sessions": "conversation_id",
    "conversation_summaries": "conversation_id",
}


def recompute_conversation(f: Forgetting, conversation_id: UUID) -> list[str]:
    """Recompute the conversation's rows; the physical tables rows were deleted from (to scrub)."""
    views = f.views()
    db, projection = views.dbs[CONVERSATIONS_VIEW], views.projections[CONVERSATIONS_VIEW]
    events = [e for e in f.store.events(conversation_id) if isinstance(e, Conversation.Event)]
    positions = f.store.positions(conversation_id)
    lock = views.lock(CONVERSATIONS_VIEW, "rebuild")  # no rebuild meanwhile: it could read stale rows
    if not lock.try_acquire():
        raise Conflict(f"a rebuild of {CONVERSATIONS_VIEW} is running; run the erasure again once it is done")
    try:
        with db.write() as conn:
            generation, tracked = tracking.active_tracking(conn, db, projection)
            touched = []
            for name, column in _BY_CONVERSATION.items():
                table = db.table(name, generation)
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", [str(conversation_id)])  # noqa: S608
                touched.append(table)
            # Events the view has not reached yet come with its next catch-up, as any.
            replay = [
                (positions[e.originator_version], e)
                for e in events
                if positions[e.originator_version] <= tracked.position
            ]
            batches.write_events(conn, db, projection, generation, replay, active=True)
            messages = db.table("messages", generation)
            last = conn.query_one(
                f"SELECT text FROM {messages} WHERE conversation_id = ? AND role = ? "  # noqa: S608
                "ORDER BY position DESC LIMIT 1",
                [str(conversation_id), Role.USER.value],
            )
            said = clean_message_text(str(last["text"]))[:LAST_USER_MESSAGE_CHARS] if last else None
            conn.execute(
                f"UPDATE {db.table('conversations', generation)} SET last_user_message = ? WHERE id = ?",  # noqa: S608
                [said, str(conversation_id)],
            )
    finally:
        lock.release()
    return touched
