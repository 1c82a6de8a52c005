"""The extraction view (issue #11, ADR 0058): which messages fact extraction has still to read.

- `extraction_messages`: one row per message extraction takes — a user's message whose cleaned text
  has at least 4 characters (`journal_text`); the assistant's own lines are not facts about the
  world — with its text and its state: `pending`, `extracted`, `failed` (the LLM out of reach; taken
  again until `MAX_ATTEMPTS`), and the counts of accepted and rejected candidates.
- `extraction_beings`: per being, the log position extraction was skipped up to (no LLM): a pending
  message at or before it reads as `skipped`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.domain.extraction import MAX_ATTEMPTS, Extraction, ExtractionCursor
from engram.domain.message import Message, Role, journal_text
from engram.projections.engine import Batch, Projection, handles
from engram.projections.notes import utc_text
from engram.projections.tables import Index, TableSpec

EXTRACTION_MESSAGES = TableSpec(
    name="extraction_messages",
    columns={
        "id": "id",  # the message's id
        "being_id": "id",
        "message_key": "text",
        "user_id": "text",
        "channel": "text",
        "text": "text",  # the cleaned text
        "at": "text",
        "position": "int",  # the message's log position
        "state": "text",  # pending | extracted | failed
        "attempts": "int",
        "accepted": "int",
        "rejected": "int",
    },
    indexes=(Index("state", ("being_id", "state", "position")),),
)

EXTRACTION_BEINGS = TableSpec(name="extraction_beings", columns={"id": "id", "skipped_upto": "int"})

VIEW = "extraction"


class ExtractionView(Projection):
    name = VIEW
    schema_version = 1
    tables = (EXTRACTION_MESSAGES, EXTRACTION_BEINGS)

    @handles(Message.Received)
    def _received(self, batch: Batch, e: Message.Received) -> None:
        text = journal_text(e.text)
        if e.role != Role.USER.value or text is None:
            return
        batch.extraction_messages.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "message_key": e.message_key,
                "user_id": e.user,
                "channel": e.channel,
                "text": text,
                "at": utc_text(e.at),
                "position": batch.position,
                "state": "pending",
                "attempts": 0,
                "accepted": 0,
                "rejected": 0,
            }
        )

    def _update(self, batch: Batch, message_id: UUID, **changes: Any) -> None:
        row = batch.extraction_messages.get(batch.conn, str(message_id))
        if row is not None:
            batch.extraction_messages.put({**row, **changes})

    @handles(Extraction.Extracted)
    def _extracted(self, batch: Batch, e: Extraction.Extracted) -> None:
        self._update(
            batch, e.message_id, state="extracted", accepted=len(e.accepted), rejected=len(e.rejected)
        )

    @handles(Extraction.Failed)
    def _failed(self, batch: Batch, e: Extraction.Failed) -> None:
        self._update(batch, e.message_id, state="failed", attempts=e.attempts)

    @handles(ExtractionCursor.Skipped)
    def _skipped(self, batch: Batch, e: ExtractionCursor.Skipped) -> None:
        batch.extraction_beings.put({"id": str(e.being_id), "skipped_upto": e.upto_position})


class ExtractionReads:
    """What extraction has to do, per being. `read` is a `ReadModels`."""

    def __init__(self, read: Any) -> None:
        self.read = read

    def pending(self, being_id: UUID | None, *, limit: int) -> list[dict[str, Any]]:
        """Messages to extract, oldest first: pending ones after the being's skip cursor, and failed
        ones with attempts left (every being's when `being_id` is None)."""
        where = (
            "((m.state = 'pending' AND m.position > COALESCE(b.skipped_upto, 0)) "
            "OR (m.state = 'failed' AND m.attempts < ?))"
        )
        params: list[Any] = [MAX_ATTEMPTS]
        if being_id is not None:
            where += " AND m.being_id = ?"
            params.append(str(being_id))
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT m.* FROM {tables['extraction_messages']} m "
                f"LEFT JOIN {tables['extraction_beings']} b ON b.id = m.being_id "
                f"WHERE {where} ORDER BY m.position LIMIT {int(limit)}",
                params,
            )
        return [dict(r) for r in rows]

    def unsettled(self, being_id: UUID, message_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Of `message_ids`, the being's messages extraction has still to read (pending, whatever the
        skip cursor, or failed with attempts left), oldest first: what compaction extracts first."""
        if not message_ids:
            return []
        marks = ", ".join("?" for _ in message_ids)
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT * FROM {tables['extraction_messages']} WHERE being_id = ? AND id IN ({marks}) "
                "AND (state = 'pending' OR (state = 'failed' AND attempts < ?)) ORDER BY position",
                [str(being_id), *message_ids, MAX_ATTEMPTS],
            )
        return [dict(r) for r in rows]

    def newest_pending(self, being_id: UUID | None) -> dict[str, tuple[int, int]]:
        """Per being: the position of its newest pending message after its skip cursor, and how many
        there are — what one `Skipped` covers when no LLM is configured."""
        where, params = "m.state = 'pending' AND m.position > COALESCE(b.skipped_upto, 0)", []
        if being_id is not None:
            where += " AND m.being_id = ?"
            params.append(str(being_id))
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                f"SELECT m.being_id, MAX(m.position) AS upto, COUNT(*) AS n FROM {tables['extraction_messages']} m "
                f"LEFT JOIN {tables['extraction_beings']} b ON b.id = m.being_id WHERE {where} GROUP BY m.being_id",
                params,
            )
        return {str(r["being_id"]): (int(r["upto"]), int(r["n"])) for r in rows}

    def counts(self, being_id: UUID) -> dict[str, int]:
        """How many of the being's messages are in each state (skipped: pending before the cursor)."""
        with self.read.reading(VIEW) as (conn, tables):
            rows = conn.query(
                "SELECT CASE WHEN m.state = 'pending' AND m.position <= COALESCE(b.skipped_upto, 0) "
                "THEN 'skipped' ELSE m.state END AS state, COUNT(*) AS n "
                f"FROM {tables['extraction_messages']} m "
                f"LEFT JOIN {tables['extraction_beings']} b ON b.id = m.being_id "
                "WHERE m.being_id = ? GROUP BY 1",
                [str(being_id)],
            )
        counts = {"pending": 0, "extracted": 0, "failed": 0, "skipped": 0}
        counts.update({str(r["state"]): int(r["n"]) for r in rows})
        return counts
