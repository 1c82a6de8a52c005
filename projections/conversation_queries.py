"""Reads of the conversations view (ADR 0052), every one scoped to one being."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from engram.projections.conversations import CONVERSATIONS, MESSAGES, SESSIONS, SUMMARIES
from engram.projections.queries import ReadModels
from engram.projections.tables import TableSpec

Row = dict[str, Any]
VIEW = "conversations"


class ConversationReads:
    def __init__(self, read: ReadModels) -> None:
        self.read = read

    def _select(self, spec: TableSpec, where: str, params: Sequence[Any], tail: str = "") -> list[Row]:
        return self.read._select(VIEW, spec, where, params, tail)

    # -- conversations ------------------------------------------------------------------------

    def conversation(self, being_id: UUID, user: str) -> Row | None:
        rows = self._select(CONVERSATIONS, "being_id = ? AND user_id = ?", [str(being_id), user])
        return rows[0] if rows else None

    def conversations(self, being_id: UUID, limit: int = 100) -> list[Row]:
        """The being's conversations, the latest interaction first."""
        return self._select(
            CONVERSATIONS,
            "being_id = ?",
            [str(being_id)],
            f"ORDER BY last_interaction DESC, user_id LIMIT {int(limit)}",
        )

    def due(self, being_id: UUID | None = None, limit: int = 100) -> list[Row]:
        """Conversations with summarising work due: a rolling summary, a spine, closed sessions to
        summarize (all beings' when `being_id` is None: the worker's round)."""
        where = "(rolling_due OR spine_due OR sessions_due)"
        params: list[Any] = []
        if being_id is not None:
            where = f"being_id = ? AND {where}"
            params.append(str(being_id))
        return self._select(CONVERSATIONS, where, params, f"ORDER BY position LIMIT {int(limit)}")

    def idle(self, received_before: str, limit: int = 500, *, being_id: UUID | None = None) -> list[Row]:
        """Conversations whose open session's latest message arrived before `received_before`
        (utc_text): the worker closes those sessions (only `being_id`'s when given: sleep's step)."""
        where, params = "open_session_id IS NOT NULL AND last_received < ?", [received_before]
        if being_id is not None:
            where += " AND being_id = ?"
            params.append(str(being_id))
        return self._select(CONVERSATIONS, where, params, f"ORDER BY last_received LIMIT {int(limit)}")

    # -- sessions -----------------------------------------------------------------------------

    def session(self, being_id: UUID, session_id: UUID | str) -> Row | None:
        rows = self._select(SESSIONS, "id = ? AND being_id = ?", [str(session_id), str(being_id)])
        return rows[0] if rows else None

    def sessions(
        self, being_id: UUID, *, user: str | None = None, limit: int = 50, before: str | None = None
    ) -> list[Row]:
        """The being's sessions (with `user` only, when given), the latest first; `before`: those
        that started before that instant (utc_text), for the next page."""
        where, params = "being_id = ?", [str(being_id)]
        if user is not None:
            where += " AND user_id = ?"
            params.append(user)
        if before is not None:
            where += " AND started_at < ?"
            params.append(before)
        return self._select(
            SESSIONS, where, params, f"ORDER BY started_at DESC, ordinal DESC LIMIT {int(limit)}"
        )

    def sessions_to_summarize(
        self, being_id: UUID, conversation_id: UUID | str, limit: int = 20
    ) -> list[Row]:
        return self._select(
            SESSIONS,
            "being_id = ? AND conversation_id = ? AND ended_at IS NOT NULL AND NOT summarized",
            [str(being_id), str(conversation_id)],
            f"ORDER BY ordinal LIMIT {int(limit)}",
        )

    def latest_summarized_session(self, being_id: UUID, user: str) -> Row | None:
        rows = self._select(
            SESSIONS,
            "being_id = ? AND user_id = ? AND summarized",
            [str(being_id), user],
            "ORDER BY ordinal DESC LIMIT 1",
        )
        return rows[0] if rows else None

    # -- messages -----------------------------------------------------------------------------

    def session_messages(self, being_id: UUID, session_id: UUID | str, limit: int = 500) -> list[Row]:
        """A session's messages in their order (time, then number), at most `limit` of the first."""
        return self._select(
            MESSAGES,
            "being_id = ? AND session_id = ?",
            [str(being_id), str(session_id)],
            f"ORDER BY at, number LIMIT {int(limit)}",
        )

    def conversation_messages(
        self,
        being_id: UUID,
        conversation_id: UUID | str,
        *,
        after_number: int = 0,
        upto_number: int | None = None,
    ) -> list[Row]:
        """A conversation's messages numbered after `after_number` (up to `upto_number`), in number order."""
        where, params = (
            "being_id = ? AND conversation_id = ? AND number > ?",
            [
                str(being_id),
                str(conversation_id),
                after_number,
            ],
        )
        if upto_number is not None:
            where += " AND number <= ?"
            params.append(upto_number)
        return self._select(MESSAGES, where, params, "ORDER BY number")

    def message(self, being_id: UUID, message_id: UUID | str) -> Row | None:
        rows = self._select(MESSAGES, "id = ? AND being_id = ?", [str(message_id), str(being_id)])
        return rows[0] if rows else None

    def messages_written_after(self, being_id: UUID, position: int, limit: int = 10_000) -> list[Row]:
        """The being's messages recorded after log `position`, in log order (the journals' increment)."""
        return self._select(
            MESSAGES,
            "being_id = ? AND position > ?",
            [str(being_id), position],
            f"ORDER BY position LIMIT {int(limit)}",
        )

    def day_messages(self, being_id: UUID, day: str) -> list[Row]:
        """The being's messages of one UTC day (YYYY-MM-DD), in journal order: time, then message id."""
        return self._select(
            MESSAGES, "being_id = ? AND day = ?", [str(being_id), day], "ORDER BY at, message_key"
        )

    # -- summaries ----------------------------------------------------------------------------

    def summaries(
        self,
        being_id: UUID,
        *,
        conversation_id: UUID | str | None = None,
        session_id: UUID | str | None = None,
        kind: str | None = None,
        limit: int = 20,
    ) -> list[Row]:
        """Summary versions (and refused answers), the latest first."""
        where, params = "being_id = ?", [str(being_id)]
        for column, value in (
            ("conversation_id", conversation_id),
            ("session_id", session_id),
            ("kind", kind),
        ):
            if value is not None:
                where += f" AND {column} = ?"
                params.append(str(value))
        return self._select(SUMMARIES, where, params, f"ORDER BY position DESC LIMIT {int(limit)}")

    def latest_spine(self, being_id: UUID, conversation_id: UUID | str) -> Row | None:
        rows = self._select(
            SUMMARIES,
            "being_id = ? AND conversation_id = ? AND kind = 'spine' AND method <> 'rejected'",
            [str(being_id), str(conversation_id)],
            "ORDER BY version DESC LIMIT 1",
        )
        return rows[0] if rows else None

    # -- journals (helper C, ADR 0054) --------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """`sql` with `{messages}` and `{conversations}` standing for the view's active tables."""
        with self.read.reading(VIEW) as (conn, tables):
            return conn.query(
                sql.format(messages=tables[MESSAGES.name], conversations=tables[CONVERSATIONS.name]),
                list(params),
            )

    def journal_head(self, being_id: UUID) -> int:
        """The log position of the being's latest message (0 without one)."""
        rows = self._rows("SELECT MAX(position) AS head FROM {messages} WHERE being_id = ?", [str(being_id)])
        return int(rows[0]["head"] or 0) if rows else 0

    def journal_days(self, being_id: UUID) -> list[tuple[str, int]]:
        """Every day with journalled messages and how many, the latest first."""
        rows = self._rows(
            "SELECT day, COUNT(*) AS lines FROM {messages} WHERE being_id = ? AND clean IS NOT NULL "
            "GROUP BY day ORDER BY day DESC",
            [str(being_id)],
        )
        return [(r["day"], int(r["lines"])) for r in rows]

    def journal_days_after(self, being_id: UUID, position: int) -> list[str]:
        """The days that got journalled messages recorded after log `position`, in order."""
        rows = self._rows(
            "SELECT DISTINCT day FROM {messages} WHERE being_id = ? AND position > ? AND clean IS NOT NULL",
            [str(being_id), position],
        )
        return sorted(r["day"] for r in rows)

    def journal_lines(self, being_id: UUID, day: str) -> list[Row]:
        """A day's journalled messages in journal order (time, then message id): only the columns a
        journal line shows."""
        return self._rows(
            "SELECT at, day, message_key, user_id, role, channel, clean FROM {messages} "
            "WHERE being_id = ? AND day = ? AND clean IS NOT NULL ORDER BY at, message_key",
            [str(being_id), day],
        )

    def journal_latest_lines(self, being_id: UUID, limit: int) -> list[Row]:
        """The being's latest journalled messages, the latest first."""
        return self._rows(
            "SELECT at, day, message_key, user_id, role, channel, clean FROM {messages} "
            f"WHERE being_id = ? AND clean IS NOT NULL ORDER BY at DESC, message_key DESC LIMIT {int(limit)}",
            [str(being_id)],
        )

    def conversation_heads(self) -> dict[str, int]:
        """Per being with conversations, the latest log position among them: every message moves its
        conversation, so a being whose head passed a position may have messages after it."""
        rows = self._rows("SELECT being_id, MAX(position) AS head FROM {conversations} GROUP BY being_id", [])
        return {str(r["being_id"]): int(r["head"]) for r in rows}

    # -- A: message search and intake --------------------------------------------------------------

    def messages_by_ids(self, being_id: UUID, message_ids: Sequence[str]) -> dict[str, Row]:
        """The being's messages of `message_ids` (Engram's ids), by id; ids of another being are left out."""
        found: dict[str, Row] = {}
        ids = list(dict.fromkeys(message_ids))
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" for _ in part)
            for row in self._select(MESSAGES, f"being_id = ? AND id IN ({marks})", [str(being_id), *part]):
                found[str(row["id"])] = row
        return found

    def message_count(self, being_id: UUID) -> int:
        """How many messages the being has (every conversation's count)."""
        rows = self._select(CONVERSATIONS, "being_id = ?", [str(being_id)])
        return sum(int(r["message_count"]) for r in rows)
