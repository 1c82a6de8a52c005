"""Daily journals and MEMORY.md (spec 001, ADR 0054): a markdown projection of a being's messages.

The files are rendered from the conversations view (`journal_markdown`, pure) and written through the
`JournalFiles` port, atomically. A refresh is incremental: each being's folder keeps the log position
of the latest message it was written up to (`.journal-state.json`, written after the days), and the
next refresh rewrites only the days that got messages after it, and MEMORY.md. A day file is always
rendered whole from the view, so a journal written live in many refreshes and one rebuilt from the
log in one are the same bytes.

The worker refreshes the beings whose conversations moved, at most once per `journal_interval_s`
(`refresh_due`); `engram journal refresh` and `POST …/memory.md/refresh` do it now. Reading a day or
MEMORY.md (`day_text`, `memory_text`) renders from the view and reads no file, so every server of a
PostgreSQL deployment answers the same whatever its local folder holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import structlog
from pydantic import BaseModel, Field

from engram.domain.being import Being
from engram.domain.errors import DomainError
from engram.projections.conversation_queries import ConversationReads
from engram.projections.fact_queries import FactReads
from engram.services.beings import resolve_being
from engram.services.errors import Conflict, NotFound, StorageFull
from engram.services.fact_memory import fact_sections_of
from engram.services.journal_markdown import (
    HIGHLIGHTS,
    JOURNAL_FORMAT,
    MEMORY_FILE,
    SOURCE_DAYS,
    DayLog,
    FactSections,
    JournalLine,
    check_day,
    journal_folder,
    render_day,
    render_memory,
)
from engram.services.ports import JournalFiles, Lock
from engram.services.store import AggregateStore
from engram.services.views import Views

log = structlog.get_logger("engram.journals")

VIEW = "conversations"
STATE_FILE = ".journal-state.json"
LOCK_WAIT_S = 30.0


class JournalRefreshed(BaseModel):
    """What a refresh wrote."""

    being: str
    folder: str = Field(description="The being's folder under the journal dir (ADR 0054).")
    full: bool = Field(description="Every file was rewritten (asked for, or the first refresh).")
    days: list[str] = Field(description="The daily files written (YYYY-MM-DD), in order.")
    memory: bool = Field(description="Whether MEMORY.md was written.")
    position: int = Field(description="The log position of the latest message the journals hold.")


def fact_sections(reads: ConversationReads, being_id: UUID) -> FactSections:
    """MEMORY.md's People (facts by subject) and Ongoing lore (the lore subject), from the facts the
    being reads: its own and its spaces' (`services/fact_memory.py`)."""
    facts = FactReads(reads.read)
    return fact_sections_of(facts, facts.owners(being_id))


class Journals:
    """`Engram.journals`."""

    def __init__(
        self,
        store: AggregateStore,
        views: Callable[[], Views],
        files: JournalFiles,
        lock: Callable[[str], Lock],
    ) -> None:
        self.store = store
        self._views = views
        self.files = files
        self._lock = lock
        self._seen: dict[str, int] = {}  # being id -> its conversations' head at its last refresh here

    # -- reading (from the view) ---------------------------------------------------------------

    def location(self, folder: str) -> str:
        """Where a being's folder is on this machine."""
        return self.files.location(folder)

    def _reads(self, being_id: UUID) -> ConversationReads:
        views = self._views()
        views.ensure(names=[VIEW, "facts"], being=being_id)
        return views.conversations

    def _being(self, ref: str | UUID) -> Being:
        return resolve_being(self.store, ref)

    def day_text(self, being_ref: str, day: str | None = None) -> tuple[str, str]:
        """The day's journal (default: the latest day) as `(day, markdown)`; `NotFound` when the day
        has no journalled message."""
        if day is not None:
            check_day(day)
        being = self._being(being_ref)
        reads = self._reads(being.id)
        if day is None:
            latest = reads.journal_latest_lines(being.id, 1)
            if not latest:
                raise NotFound(f"{being.name} has no journal yet: no message was journalled")
            day = str(latest[0]["day"])
        rows = reads.journal_lines(being.id, day)
        if not rows:
            raise NotFound(f"{being.name} has no journal for {day}")
        return day, self._day(being, day, rows)

    def memory_text(self, being_ref: str) -> str:
        being = self._being(being_ref)
        reads = self._reads(being.id)
        return self._memory(reads, being, reads.journal_days(being.id))

    def _day(self, being: Being, day: str, rows: list[dict[str, Any]]) -> str:
        return render_day(being.name, day, [JournalLine.of(r, being.name) for r in rows])

    def _memory(self, reads: ConversationReads, being: Being, days: list[tuple[str, int]]) -> str:
        """MEMORY.md, given every day with journalled messages and their count, the latest first."""
        latest = reads.journal_latest_lines(being.id, HIGHLIGHTS)
        return render_memory(
            being.name,
            fact_sections(reads, being.id),
            [JournalLine.of(r, being.name) for r in latest],
            [DayLog(day, lines) for day, lines in days[:SOURCE_DAYS]],
            max(len(days) - SOURCE_DAYS, 0),
        )

    # -- writing (to the files) ----------------------------------------------------------------

    def refresh(self, being_ref: str | UUID, *, full: bool = False) -> JournalRefreshed:
        """Write the being's journals up to date: the days that got messages since the last refresh
        and MEMORY.md (every file with `full`, or when the folder has no state of this format).
        Another refresh of the being running: waits for it (`Conflict` after 30 s)."""
        being = self._being(being_ref)
        lock = self._lock(f"journal:{being.id}")
        deadline = time.monotonic() + LOCK_WAIT_S
        while not lock.try_acquire():
            if time.monotonic() > deadline:
                raise Conflict(f"another refresh of {being.name}'s journals is running; try again")
            time.sleep(0.05)
        try:
            return self._refresh(being, full)
        finally:
            lock.release()

    def _refresh_unless_busy(self, being_id: UUID) -> JournalRefreshed | None:
        """`refresh`, or None at once when another refresh of the being runs (the worker's way)."""
        being = self._being(being_id)
        lock = self._lock(f"journal:{being.id}")
        if not lock.try_acquire():
            return None
        try:
            return self._refresh(being, full=False)
        finally:
            lock.release()

    def _state(self, folder: str, being_id: UUID) -> tuple[int, dict[str, int]] | None:
        """The position the folder was written up to and its days' line counts, if its state is of
        this being and format."""
        text = self.files.read(folder, STATE_FILE)
        if text is None:
            return None
        try:
            state: Any = json.loads(text)
            if state["being_id"] == str(being_id) and state["format"] == JOURNAL_FORMAT:
                return int(state["position"]), {str(d): int(n) for d, n in state["days"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("journal state unreadable; rewriting every file", folder=folder)
        return None

    def _refresh(self, being: Being, full: bool) -> JournalRefreshed:
        folder = journal_folder(being.name, being.id)
        reads = self._reads(being.id)
        head = reads.journal_head(being.id)  # read first: the days read after hold at least this
        state = None if full else self._state(folder, being.id)
        if state is not None and head <= state[0]:
            return JournalRefreshed(
                being=being.name, folder=folder, full=False, days=[], memory=False, position=state[0]
            )
        # The days' line counts (MEMORY.md's list of daily logs) are kept in the state, so that an
        # increment reads only the days it rewrites, never the being's whole history.
        counts = dict(reads.journal_days(being.id)) if state is None else state[1]
        days = sorted(counts) if state is None else reads.journal_days_after(being.id, state[0])
        for day in days:
            rows = reads.journal_lines(being.id, day)
            counts[day] = len(rows)
            if rows:
                self.files.write(folder, f"{day}.md", self._day(being, day, rows))
        memory = state is None or bool(days)
        if memory:
            ordered = sorted(((d, n) for d, n in counts.items() if n), reverse=True)
            self.files.write(folder, MEMORY_FILE, self._memory(reads, being, ordered))
        kept = {"being_id": str(being.id), "format": JOURNAL_FORMAT, "position": head, "days": counts}
        self.files.write(folder, STATE_FILE, json.dumps(kept, sort_keys=True) + "\n")
        if days:
            log.info("journals written", being=being.name, days=len(days), full=state is None, position=head)
        return JournalRefreshed(
            being=being.name, folder=folder, full=state is None, days=days, memory=memory, position=head
        )

    def refresh_due(self, *, stopping: Callable[[], bool] = lambda: False) -> list[JournalRefreshed]:
        """The worker's round: refresh every being whose conversations moved since this process last
        refreshed it (all of them, against their folders' state, after a start)."""
        views = self._views()
        views.ensure(names=[VIEW])
        done: list[JournalRefreshed] = []
        for being_id, head in sorted(views.conversations.conversation_heads().items()):
            if stopping():
                break
            if self._seen.get(being_id, -1) >= head:
                continue
            try:
                report = self._refresh_unless_busy(UUID(being_id))
            except StorageFull:  # every being would fail alike: the worker logs it once, tries later
                raise
            except DomainError as exc:  # e.g. the view holds this being's events back: the others go on
                log.warning("journals not refreshed", being_id=being_id, error=exc.code, reason=exc.message)
                continue
            if report is not None:  # else another refresh of it runs: the next round sees it
                self._seen[being_id] = head
                done.append(report)
        return done
