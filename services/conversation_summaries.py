"""The summariser (issue #10, ADR 0053): a process manager that writes what the conversations view
says is due, and the worker's closing of idle sessions.

For each conversation with work due it writes, in this order, the summaries of its closed sessions,
the rolling summary of its open session, then the spine. Each piece is written outside any
transaction (an LLM call, or the extractive method); then a command reloads the conversation, checks
the work is still due — another summariser may have done it meanwhile, or a message moved the session
on — and records the event. Two summarisers at once therefore record one version: the second finds
the work done (or loses the write race, runs again and finds it done) and records nothing.

A refused LLM answer is recorded (`SummaryRejected`) and the work stays due: it is asked again at its
next trigger (the next message, the next worker round, the next `sessions summarize`), never in a
loop. An LLM that cannot be reached defers the work without recording anything.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import structlog

from engram.domain.conversation import ROLLING_EVERY, Conversation, SummaryKind, SummaryMethod
from engram.projections.conversation_queries import ConversationReads
from engram.projections.notes import utc_text
from engram.services.beings import resolve_being_id
from engram.services.errors import ServiceError, StorageFull
from engram.services.messages import MessageCommands
from engram.services.ports import Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore
from engram.services.summary_writing import Deferred, Outcome, Refused, SummaryWriter, Written

log = structlog.get_logger("engram.summaries")

MAX_SESSION_MESSAGES = 2000  # a session summary reads at most this many of its messages (the first)
MAX_SPINE_MESSAGES = 1000  # a spine reads at most the latest this many messages since the previous one
SPINE_SESSION_SUMMARIES = 3  # the latest session summaries a spine prompt shows
DEFAULT_LIMIT = 100  # conversations a round looks at


class NoLLM(ServiceError):
    code = "llm_not_configured"


@dataclass
class SummaryReport:
    """What one round wrote: counts of each kind, refused answers, deferred and skipped work."""

    conversations: int = 0
    sessions: int = 0
    rolling: int = 0
    spines: int = 0
    rejected: int = 0
    deferred: int = 0
    skipped: int = 0  # done by another summariser meanwhile
    closed: int = 0  # idle sessions closed first (the worker's round)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SummaryProgress:
    done: int
    total: int
    report: SummaryReport


class ConversationSummaries:
    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        reads: Callable[[], ConversationReads],
        being_name: Callable[[UUID], str],
        writer: SummaryWriter,
        messages: MessageCommands,
        session_gap: timedelta,
        catch_up: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self.reads = reads
        self.being_name = being_name
        self.writer = writer
        self.messages = messages
        self.session_gap = session_gap
        self.catch_up = catch_up

    # -- the worker's round ---------------------------------------------------------------------

    def worker_round(self, *, stopping: Callable[[], bool] = lambda: False) -> SummaryReport:
        """Close idle sessions, then write what is due (every being's)."""
        closed = self.close_idle(self.clock.now())
        report = self.run_due(stopping=stopping)
        report.closed = closed
        if closed or report.sessions or report.rolling or report.spines or report.rejected:
            log.info("conversation summaries", **report.as_dict())
        return report

    def close_idle(self, now: datetime, *, being_id: UUID | None = None, limit: int = 500) -> int:
        """Close the open sessions no message reached for the session gap before `now` (recorded in
        each `SessionClosed` as `seen_at`), of every being or of `being_id` only; how many closed."""
        rows = self.reads().idle(utc_text(now - self.session_gap), limit, being_id=being_id)
        by_being: dict[str, list[UUID]] = defaultdict(list)
        for row in rows:
            by_being[row["being_id"]].append(UUID(row["id"]))
        closed = 0
        for being, ids in by_being.items():
            try:
                closed += self.messages.close_idle(being, ids, now)
            except StorageFull:  # nothing more can be written: the next round tries again
                raise
            except Exception:  # one being's trouble never keeps the others' sessions open
                log.error("closing idle sessions failed", being_id=being, exc_info=True)
        return closed

    # -- what is due ----------------------------------------------------------------------------

    def run_due(
        self,
        being_ref: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        progress: Callable[[SummaryProgress], None] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> SummaryReport:
        """Write what is due for `being_ref`'s conversations (every being's when None), at most
        `limit` conversations. A call for one being catches the views up first; the worker's round
        (every being) reads the view it keeps as it is."""
        being_id = resolve_being_id(self.store, being_ref) if being_ref is not None else None
        if being_id is not None:
            self.catch_up()
        rows = self.reads().due(being_id, limit=limit)
        report = SummaryReport()
        for done, row in enumerate(rows, 1):
            if stopping():
                break
            report.conversations += 1
            try:
                self._conversation(row, report)
            except StorageFull:  # nothing more can be written: the next round tries again
                raise
            except Exception as exc:  # one conversation's trouble never stops the others
                if being_ref is not None:
                    raise
                log.error("summarising a conversation failed", conversation_id=row["id"], exc_info=True)
                report.errors.append(f"{row['id']}: {type(exc).__name__}: {exc}")
            if progress is not None:
                progress(SummaryProgress(done, len(rows), report))
        return report

    def run_until_done(
        self, being_ref: str, *, progress: Callable[[SummaryReport], None] | None = None
    ) -> SummaryReport:
        """`run_due` for one being, again and again until a round writes nothing: what an import of
        history wants before its sessions are shown (one round takes a bounded number of sessions
        per conversation). Refused answers do not loop: they wait for the next message."""
        total = SummaryReport()
        while True:
            report = self.run_due(being_ref)
            for name in ("conversations", "sessions", "rolling", "spines", "rejected", "deferred", "skipped"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.errors.extend(report.errors)
            if progress is not None:
                progress(total)
            if report.sessions + report.rolling + report.spines == 0:
                return total

    def _conversation(self, row: Mapping[str, Any], report: SummaryReport) -> None:
        being_id, conversation_id, user = UUID(row["being_id"]), UUID(row["id"]), row["user_id"]
        being = self.being_name(being_id)
        reads = self.reads()
        sessions = reads.sessions_to_summarize(being_id, conversation_id) if row["sessions_due"] else []
        for session in sessions:
            self._session(being_id, conversation_id, UUID(session["id"]), being, user, report)
        if row["rolling_due"] and row["open_session_id"] is not None:
            self._rolling(being_id, conversation_id, UUID(row["open_session_id"]), being, user, row, report)
        if row["spine_due"]:
            self._spine(
                being_id, conversation_id, being, user, row["spine_upto"], row["message_count"], report
            )

    def _session(
        self,
        being_id: UUID,
        conversation_id: UUID,
        session_id: UUID,
        being: str,
        user: str,
        report: SummaryReport,
        *,
        redo: bool = False,
    ) -> None:
        messages = self.reads().session_messages(being_id, session_id, limit=MAX_SESSION_MESSAGES)
        outcome = self.writer.session(messages, being, user)

        def still_due(c: Conversation) -> bool:
            return redo or (session_id in c.unsummarized and c.sessions_due)

        def record(c: Conversation, w: Written) -> None:
            c.summarize_session(session_id, w.content, self.clock.now(), **w.recorded())

        self._record(being_id, conversation_id, outcome, still_due, record, report, "sessions", session_id)

    def _rolling(
        self,
        being_id: UUID,
        conversation_id: UUID,
        session_id: UUID,
        being: str,
        user: str,
        row: Mapping[str, Any],
        report: SummaryReport,
    ) -> None:
        reads = self.reads()
        messages = reads.session_messages(being_id, session_id, limit=MAX_SESSION_MESSAGES)
        by_number = sorted(messages, key=lambda m: m["number"])
        turns, rolled = int(row["open_turns"]), int(row["rolled_turns"])
        # The view holds the conversation's latest message: fewer messages than turns are forgotten
        # ones (ADR 0093), whose summary is due again now; else the view may not have them all yet.
        caught_up = bool(by_number) and int(by_number[-1]["number"]) == int(row["message_count"])
        upto = turns if caught_up else min(len(messages), turns)
        if upto - rolled < ROLLING_EVERY:
            return  # the view has not seen the messages yet
        forgotten = turns - len(messages) if caught_up else 0
        new = by_number[max(0, rolled - forgotten) : upto]
        session = reads.session(being_id, session_id)
        previous = session["rolling_text"] if session is not None else None
        outcome = self.writer.rolling(previous, by_number[:upto], new, being, user)

        def still_due(c: Conversation) -> bool:
            return (
                c.open is not None
                and c.open["id"] == session_id
                and c.open["rolled_turns"] < upto
                and c.retry_allowed(SummaryKind.ROLLING)
            )

        def record(c: Conversation, w: Written) -> None:
            c.summarize_rolling(w.content, upto, self.clock.now(), **w.recorded())

        self._record(being_id, conversation_id, outcome, still_due, record, report, "rolling", session_id)

    def _spine(
        self,
        being_id: UUID,
        conversation_id: UUID,
        being: str,
        user: str,
        spine_upto: int,
        upto: int,
        report: SummaryReport,
        *,
        redo: bool = False,
    ) -> None:
        reads = self.reads()
        latest = reads.latest_spine(being_id, conversation_id)
        previous = json.loads(latest["content"]) if latest is not None else None
        after = spine_upto
        if redo and latest is not None:
            # A redone spine is a new version of the latest: built on the one before it, not on itself.
            older = reads.summaries(being_id, conversation_id=conversation_id, kind="spine", limit=10)
            before = [r for r in older if r["method"] != "rejected" and r["version"] < latest["version"]]
            previous = json.loads(before[0]["content"]) if before else None
            after = before[0]["upto"] if before else 0
        messages = reads.conversation_messages(
            being_id, conversation_id, after_number=max(after, upto - MAX_SPINE_MESSAGES), upto_number=upto
        )
        summaries = [
            json.loads(r["content"])
            for r in reads.summaries(
                being_id, conversation_id=conversation_id, kind="session", limit=SPINE_SESSION_SUMMARIES * 2
            )
            if r["method"] != "rejected"
        ][:SPINE_SESSION_SUMMARIES]
        outcome = self.writer.spine(previous, summaries, messages, being, user)

        def still_due(c: Conversation) -> bool:
            return (
                (c.spine_upto <= upto)
                if redo
                else (c.spine_upto < upto and c.retry_allowed(SummaryKind.SPINE))
            )

        def record(c: Conversation, w: Written) -> None:
            c.write_spine(w.content, upto, self.clock.now(), redo=redo, **w.recorded())

        self._record(being_id, conversation_id, outcome, still_due, record, report, "spines", None)

    def _record(
        self,
        being_id: UUID,
        conversation_id: UUID,
        outcome: Outcome,
        still_due: Callable[[Conversation], bool],
        record: Callable[[Conversation, Written], None],
        report: SummaryReport,
        counter: str,
        session_id: UUID | None,
    ) -> None:
        """Record `outcome` on the conversation as it is now, if the work is still due."""
        if isinstance(outcome, Deferred):
            log.warning("summary deferred", reason=outcome.reason, conversation_id=str(conversation_id))
            report.deferred += 1
            return

        def handle() -> bool:
            c = self.store.get(Conversation, conversation_id, being_id=being_id)
            if not still_due(c):
                return False
            if isinstance(outcome, Refused):
                c.reject_summary(
                    outcome.kind,
                    outcome.reason,
                    self.clock.now(),
                    model=outcome.model,
                    prompt_version=outcome.prompt_version,
                    session_id=session_id,
                    answer=outcome.answer,
                )
            else:
                record(c, outcome)
            self.store.save(c)
            return True

        if not self.runner.run("summarize_conversation", handle, being_id=being_id):
            report.skipped += 1
        elif isinstance(outcome, Refused):
            log.warning("summary answer refused", kind=outcome.kind.value, reason=outcome.reason)
            report.rejected += 1
        else:
            setattr(report, counter, getattr(report, counter) + 1)

    # -- resummarize ----------------------------------------------------------------------------

    def resummarize(self, being_ref: str, *, user: str | None = None, limit: int = 1000) -> SummaryReport:
        """With an LLM: write LLM versions of the session summaries (and of each conversation's latest
        spine) that are extractive. New events; the extractive versions stay in the log."""
        if self.writer.llm() is None:
            raise NoLLM("no LLM is configured (ENGRAM_LLM): the summaries stay extractive")
        being_id = resolve_being_id(self.store, being_ref)
        self.catch_up()
        being = self.being_name(being_id)
        reads = self.reads()
        report = SummaryReport()
        sessions = [
            s for s in reads.sessions(being_id, user=user, limit=limit) if s["summary_method"] == "extractive"
        ]
        touched = {s["conversation_id"] for s in sessions}
        for s in sorted(sessions, key=lambda s: (s["user_id"], s["ordinal"])):
            self._session(
                being_id, UUID(s["conversation_id"]), UUID(s["id"]), being, s["user_id"], report, redo=True
            )
        conversations = [reads.conversation(being_id, user)] if user else reads.conversations(being_id)
        for c in conversations:
            if c is None:
                continue
            latest = reads.latest_spine(being_id, c["id"])
            if latest is not None and latest["method"] == SummaryMethod.EXTRACTIVE.value:
                touched.add(c["id"])
                self._spine(
                    being_id,
                    UUID(c["id"]),
                    being,
                    c["user_id"],
                    latest["upto"],
                    latest["upto"],
                    report,
                    redo=True,
                )
        report.conversations = len(touched)
        return report
