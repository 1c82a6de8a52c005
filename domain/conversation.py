"""A being's conversation with one user: sessions, state and summaries (spec 004; issue #10, ADR 0052).

One `Conversation` per being and user, with an id derived from both: every message of the user (and
every answer of the being to them) moves it in the same transaction as the `Message`, so messages
delivered at once are counted one after the other, never both as turn 5.

- **Sessions** open with a message and close when a later message comes more than the gap (30
  minutes by default) after the last one — decided from the messages' own times, so imported history
  forms the sessions live traffic would — or when the worker sees the session idle (`close_idle`, the
  clock reading recorded in the event).
- **State** (spec 004's SessionState): message count over all sessions, last interaction, turns of
  the open session. The last user message is the view's, read from the message's own event: a
  `Heard` no longer quotes it (v2, ADR 0093), so forgetting the message leaves no copy here.
- **Summaries**: a rolling summary of the open session every 4 messages, a session summary when a
  session closes, a summary spine every 20 messages. Spec 004 overwrites its rolling summary and
  loses what it held; here every version is an event and the latest is shown. Each records how it
  was written (`extractive`, or `llm` with model, prompt version and capped answer); a refused LLM
  answer is a `SummaryRejected` event, and the work stays due for the next trigger.
- **Summary keys** (ADR 0093): each summary event (v2) names `summary_key`, a key of its own, so that
  forgetting one message it quotes destroys that key alone; the conversation then reads as if the
  summary had not been written (`ERASABLE_TOPICS`) and the work is due again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar, TypedDict
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.ids import session_id_for
from engram.domain.message import Role
from engram.domain.text import check_text

DEFAULT_SESSION_GAP = timedelta(minutes=30)
ROLLING_EVERY = 4  # messages of the open session between two rolling summaries
SPINE_EVERY = 20  # messages of the conversation between two spine versions
MAX_ROLLING_CHARS = 600
LAST_USER_MESSAGE_CHARS = 200  # the view's last user message (projections/conversations.py)
MAX_ONE_LINER_CHARS = 200
MAX_TONE_CHARS = 80
MAX_SUMMARY_ITEMS = 8
MAX_SUMMARY_ITEM_CHARS = 240
SUMMARY_LISTS = ("what_mattered", "open_loops", "commitments", "people")
SPINE_SECTIONS = ("PROFILE", "PROJECTS", "PEOPLE", "OPEN_LOOPS")
MAX_SPINE_ITEMS = 12
MAX_SPINE_ITEM_CHARS = 240
MAX_REASON_CHARS = 500


def summary_key_for(conversation_id: UUID, version: int) -> UUID:
    """The key a summary event of the conversation at `version` is sealed under (ADR 0093):
    derived, so that the domain draws nothing at random, and never the same for two events."""
    return uuid5(conversation_id, f"summary:{version}")


def _no_summary_key(state: dict[str, Any]) -> None:
    # v1 summaries were sealed under the conversation's key (ADR 0075): they stay as they are.
    state["summary_key"] = None


def quotes_under_conversation_key(event: Any) -> bool:
    """Whether a conversation event holds a message's words under the conversation's key: a v1
    `Heard` with its excerpt, or a v1 summary (ADR 0093: forgetting one message refuses those)."""
    if getattr(event, "excerpt", None) is not None:
        return True
    return hasattr(event, "summary_key") and event.summary_key is None


class SummaryMethod(StrEnum):
    EXTRACTIVE = "extractive"  # no LLM: sentences of the messages themselves (ADR 0053)
    LLM = "llm"  # an LLM's validated answer; model and prompt version recorded


class SummaryKind(StrEnum):
    ROLLING = "rolling"
    SESSION = "session"
    SPINE = "spine"


class CloseReason(StrEnum):
    GAP = "gap"  # a later message came more than the gap after the session's last one
    IDLE = "idle"  # the worker saw no message arrive for the gap


def _bounded(field: str, value: Any, limit: int, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} is text", field=field)
    if (not value.strip() and not empty_ok) or len(value) > limit:
        raise InvalidInput(f"{field} has {0 if empty_ok else 1} to {limit} characters", field=field)
    check_text(field, value)
    return value


def _items(field: str, value: Any, count: int, chars: int) -> list[str]:
    if not isinstance(value, list) or len(value) > count:
        raise InvalidInput(f"{field} is a list of at most {count} items", field=field)
    return [_bounded(f"{field}.{i}", item, chars) for i, item in enumerate(value)]


def check_session_summary(summary: Any) -> dict[str, Any]:
    """Spec 004's session summary, checked: `{one_liner, what_mattered[], open_loops[],
    commitments[], people[], tone}` within bounds, nothing else."""
    if not isinstance(summary, dict):
        raise InvalidInput("a session summary is an object", field="summary")
    expected = {"one_liner", "tone", *SUMMARY_LISTS}
    if set(summary) != expected:
        raise InvalidInput(
            f"a session summary has exactly the fields {', '.join(sorted(expected))}", field="summary"
        )
    checked: dict[str, Any] = {"one_liner": _bounded("one_liner", summary["one_liner"], MAX_ONE_LINER_CHARS)}
    for name in SUMMARY_LISTS:
        checked[name] = _items(name, summary[name], MAX_SUMMARY_ITEMS, MAX_SUMMARY_ITEM_CHARS)
    checked["tone"] = _bounded("tone", summary["tone"], MAX_TONE_CHARS)
    return checked


def check_spine(sections: Any) -> dict[str, list[str]]:
    """A spine's sections: PROFILE, PROJECTS, PEOPLE and OPEN_LOOPS, each a bounded list."""
    if not isinstance(sections, dict) or set(sections) != set(SPINE_SECTIONS):
        raise InvalidInput(f"a spine has exactly the sections {', '.join(SPINE_SECTIONS)}", field="sections")
    return {s: _items(s, sections[s], MAX_SPINE_ITEMS, MAX_SPINE_ITEM_CHARS) for s in SPINE_SECTIONS}


def _check_method(method: SummaryMethod | str, model: str | None, prompt_version: str | None) -> str:
    method = SummaryMethod(method)
    if method == SummaryMethod.LLM and (not model or not prompt_version):
        raise InvalidInput("an LLM summary records its model and prompt version")
    if method == SummaryMethod.EXTRACTIVE and model is not None:
        raise InvalidInput("an extractive summary has no model")
    return method.value


class OpenSession(TypedDict):
    """The open session of a conversation (spec 004's Session while `endedAt` is null). A plain
    mapping, so that a snapshot of the conversation stores it as it stores the rest."""

    id: UUID
    ordinal: int
    started_at: datetime
    last_at: datetime  # the latest message time in the session
    last_received: datetime  # when the latest message arrived (the intake's clock)
    turns: int
    rolled_turns: int  # the turn count the latest rolling summary covers


class Conversation(BeingScopedAggregate):
    TOPIC = "engram.Conversation"
    # Events sealed under a key of their own (a summary's, ADR 0093): once it is destroyed the
    # conversation replays without them (`ErasedContent.mutate`), and their work is due again.
    ERASABLE_TOPICS: ClassVar[frozenset[str]] = frozenset(
        {
            "engram.Conversation.RollingSummarized",
            "engram.Conversation.SessionSummarized",
            "engram.Conversation.SpineWritten",
            "engram.Conversation.SummaryRejected",
        }
    )

    class Event(Aggregate.Event):
        TOPIC = "engram.Conversation.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.Conversation.Started"
        class_version = 1
        user: str

    class SessionOpened(Event):
        TOPIC = "engram.Conversation.SessionOpened"
        class_version = 1
        session_id: UUID
        ordinal: int
        started_at: datetime

        def apply(self, c: Conversation) -> None:
            c.open = OpenSession(
                id=self.session_id,
                ordinal=self.ordinal,
                started_at=self.started_at,
                last_at=self.started_at,
                last_received=self.timestamp,
                turns=0,
                rolled_turns=0,
            )
            c.sessions = self.ordinal

    class Heard(Event):
        """A message joined the conversation: `session_id` is the session it joined (None: a late
        message, older than the open session's window, that joins none, ADR 0052).

        v1 also carried `excerpt`, a user message's cleaned text (spec 004's lastUserMessage), under
        the conversation's key: forgetting the message left it readable. v2 carries no text (ADR
        0093); a v1 event read now keeps its `excerpt` as an attribute nothing applies."""

        TOPIC = "engram.Conversation.Heard"
        class_version = 2
        message_id: UUID
        at: datetime
        role: str
        session_id: UUID | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            pass  # `excerpt` stays in the old record: see `quotes_under_conversation_key`

        def apply(self, c: Conversation) -> None:
            c.message_count += 1
            if c.last_interaction is None or self.at > c.last_interaction:
                c.last_interaction = self.at
            if c.open is not None and self.session_id == c.open["id"]:
                c.open["turns"] += 1
                c.open["last_at"] = max(c.open["last_at"], self.at)
                c.open["last_received"] = self.timestamp

    class SessionClosed(Event):
        """`ended_at`: the session's last message time. `seen_at`: what decided it — the later
        message's time (`gap`) or the worker's clock reading (`idle`)."""

        TOPIC = "engram.Conversation.SessionClosed"
        class_version = 1
        session_id: UUID
        ended_at: datetime
        turns: int
        reason: str
        seen_at: datetime

        def apply(self, c: Conversation) -> None:
            c.open = None
            c.unsummarized.append(self.session_id)

    class RollingSummarized(Event):
        TOPIC = "engram.Conversation.RollingSummarized"
        class_version = 2
        summary_key: UUID | None  # the key it is sealed under (None: v1, the conversation's)
        upcast_v1_v2 = staticmethod(_no_summary_key)
        session_id: UUID
        version: int
        text: str
        upto_turn: int
        method: str
        model: str | None
        prompt_version: str | None
        answer: str | None

        def apply(self, c: Conversation) -> None:
            c.rolling_versions += 1
            if c.open is not None and c.open["id"] == self.session_id:
                c.open["rolled_turns"] = max(c.open["rolled_turns"], self.upto_turn)

    class SessionSummarized(Event):
        TOPIC = "engram.Conversation.SessionSummarized"
        class_version = 2
        summary_key: UUID | None  # the key it is sealed under (None: v1, the conversation's)
        upcast_v1_v2 = staticmethod(_no_summary_key)
        session_id: UUID
        summary: dict[str, Any]
        method: str
        model: str | None
        prompt_version: str | None
        answer: str | None

        def apply(self, c: Conversation) -> None:
            if self.session_id in c.unsummarized:
                c.unsummarized.remove(self.session_id)

    class SpineWritten(Event):
        """A new version of the summary spine, built on the previous one (`sections`), covering the
        conversation's first `upto_count` messages."""

        TOPIC = "engram.Conversation.SpineWritten"
        class_version = 2
        summary_key: UUID | None  # the key it is sealed under (None: v1, the conversation's)
        upcast_v1_v2 = staticmethod(_no_summary_key)
        version: int
        sections: dict[str, list[str]]
        upto_count: int
        method: str
        model: str | None
        prompt_version: str | None
        answer: str | None

        def apply(self, c: Conversation) -> None:
            c.spine_version = self.version
            c.spine_upto = self.upto_count

    class SummaryRejected(Event):
        """An LLM answer for a summary was refused (`reason`); the work stays due and is asked again
        at its next trigger. The answer is kept, capped, for the audit trail."""

        TOPIC = "engram.Conversation.SummaryRejected"
        class_version = 2
        summary_key: UUID | None  # the key it is sealed under (None: v1, the conversation's)
        upcast_v1_v2 = staticmethod(_no_summary_key)
        kind: str
        session_id: UUID | None
        reason: str
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, c: Conversation) -> None:
            c.rejections += 1
            c.refused[self.kind] = c.message_count

    class SummariesWithdrawn(Event):
        """Summaries of this conversation were erased (a message they covered was forgotten, ADR
        0093): the counters they had moved, as the conversation stands without them. A replay of the
        log gets there by itself (the erased events are skipped); a process that held the conversation
        from before (its aggregate cache) is set right by this event. No text."""

        TOPIC = "engram.Conversation.SummariesWithdrawn"
        class_version = 1
        count: int  # the summary events erased
        rolling_versions: int
        rolled_turns: int | None  # the open session's (None: none open)
        unsummarized: list[UUID]
        spine_version: int
        spine_upto: int
        rejections: int
        refused: dict[str, int]

        def apply(self, c: Conversation) -> None:
            c.rolling_versions = self.rolling_versions
            if c.open is not None and self.rolled_turns is not None:
                c.open["rolled_turns"] = self.rolled_turns
            c.unsummarized = list(self.unsummarized)
            c.spine_version = self.spine_version
            c.spine_upto = self.spine_upto
            c.rejections = self.rejections
            c.refused = dict(self.refused)

    def __init__(self, being_id: UUID, user: str) -> None:
        self.being_id = being_id
        self.user = user
        self.message_count = 0
        self.last_interaction: datetime | None = None
        self.open: OpenSession | None = None
        self.sessions = 0  # sessions opened so far (the next one's ordinal is this + 1)
        self.unsummarized: list[UUID] = []  # closed sessions still without a summary
        self.rolling_versions = 0
        self.spine_version = 0
        self.spine_upto = 0
        self.rejections = 0
        # kind -> the message count when an LLM answer for it was last refused: that work is asked
        # again at its next trigger, the conversation's next message, not at every worker round.
        self.refused: dict[str, int] = {}

    @classmethod
    def start(cls, conversation_id: UUID, being_id: UUID, user: str, at: datetime) -> Conversation:
        conversation: Conversation = cls._create(
            cls.Started, id=conversation_id, being_id=being_id, timestamp=at, user=user
        )
        return conversation

    # -- messages and sessions ----------------------------------------------------------------

    def hear(
        self, message_id: UUID, at: datetime, role: Role | str, text: str, received: datetime, gap: timedelta
    ) -> tuple[UUID | None, int]:
        """Place a message (time `at`) in the conversation: the session it joins and its number.

        - no open session: it opens one, unless it is older than the last interaction (a late
          message after its session closed: it joins none);
        - more than `gap` after the open session's last message: that session closes (`gap`) and a
          new one opens;
        - otherwise it joins the open session, also when it is a little late (not more than `gap`
          before the session started); older than that, it joins none.
        """
        if gap <= timedelta(0):
            raise InvalidInput("the session gap is positive", field="gap")
        role = Role(role)
        session: UUID | None = None
        if self.open is not None and at > self.open["last_at"] + gap:
            self._close(CloseReason.GAP, seen_at=at, received=received)
        if self.open is not None:
            if at >= self.open["started_at"] - gap:
                session = self.open["id"]
        elif self.last_interaction is None or at >= self.last_interaction:
            ordinal = self.sessions + 1
            session = session_id_for(self.id, ordinal)
            self._emit(self.SessionOpened, received, session_id=session, ordinal=ordinal, started_at=at)
        self._emit(self.Heard, received, message_id=message_id, at=at, role=role.value, session_id=session)
        return session, self.message_count

    def _close(self, reason: CloseReason, *, seen_at: datetime, received: datetime) -> None:
        assert self.open is not None
        self._emit(
            self.SessionClosed,
            received,
            session_id=self.open["id"],
            ended_at=self.open["last_at"],
            turns=self.open["turns"],
            reason=reason.value,
            seen_at=seen_at,
        )

    def idle_since(self) -> datetime | None:
        """When the open session's latest message arrived (None: no open session)."""
        return self.open["last_received"] if self.open is not None else None

    def close_idle(self, now: datetime, gap: timedelta) -> bool:
        """Close the open session if no message arrived for `gap` (by the intake's clock: history
        imported now keeps its session open while the import goes on). `now` is recorded."""
        if self.open is None or now - self.open["last_received"] < gap:
            return False
        self._close(CloseReason.IDLE, seen_at=now, received=now)
        return True

    # -- what is due ----------------------------------------------------------------------------

    def retry_allowed(self, kind: SummaryKind | str) -> bool:
        """False while the last answer for `kind` was refused and no message came since (a refused
        summary is asked again at the next trigger, never in a loop)."""
        return self.refused.get(SummaryKind(kind).value, -1) < self.message_count

    @property
    def rolling_due(self) -> bool:
        return (
            self.open is not None
            and self.open["turns"] - self.open["rolled_turns"] >= ROLLING_EVERY
            and self.retry_allowed(SummaryKind.ROLLING)
        )

    @property
    def spine_due(self) -> bool:
        return self.message_count - self.spine_upto >= SPINE_EVERY and self.retry_allowed(SummaryKind.SPINE)

    @property
    def sessions_due(self) -> bool:
        """Closed sessions wait for their summary (and the last answer was not refused since)."""
        return bool(self.unsummarized) and self.retry_allowed(SummaryKind.SESSION)

    # -- summaries --------------------------------------------------------------------------------

    def summarize_rolling(
        self,
        text: str,
        upto_turn: int,
        at: datetime,
        *,
        method: SummaryMethod | str,
        model: str | None = None,
        prompt_version: str | None = None,
        answer: str | None = None,
    ) -> None:
        """A new rolling summary of the open session, covering its first `upto_turn` turns."""
        if self.open is None:
            raise InvalidTransition("a rolling summary is of the open session, and none is open")
        if not 0 < upto_turn <= self.open["turns"]:
            raise InvalidInput(f"upto_turn is 1 to {self.open['turns']}", field="upto_turn")
        _bounded("text", text, MAX_ROLLING_CHARS)
        self._emit(
            self.RollingSummarized,
            at,
            summary_key=summary_key_for(self.id, self.version + 1),
            session_id=self.open["id"],
            version=self.rolling_versions + 1,
            text=text,
            upto_turn=upto_turn,
            method=_check_method(method, model, prompt_version),
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def summarize_session(
        self,
        session_id: UUID,
        summary: dict[str, Any],
        at: datetime,
        *,
        method: SummaryMethod | str,
        model: str | None = None,
        prompt_version: str | None = None,
        answer: str | None = None,
    ) -> None:
        """The summary of a closed session. A session summarized again (`sessions resummarize`)
        gets a new version; the old one stays in the log."""
        if self.open is not None and self.open["id"] == session_id:
            raise InvalidTransition("a session is summarized once it has closed")
        if not any(session_id == session_id_for(self.id, n) for n in range(1, self.sessions + 1)):
            raise InvalidInput(f"session {session_id} is not of this conversation", field="session_id")
        self._emit(
            self.SessionSummarized,
            at,
            summary_key=summary_key_for(self.id, self.version + 1),
            session_id=session_id,
            summary=check_session_summary(summary),
            method=_check_method(method, model, prompt_version),
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def write_spine(
        self,
        sections: dict[str, list[str]],
        upto_count: int,
        at: datetime,
        *,
        method: SummaryMethod | str,
        model: str | None = None,
        prompt_version: str | None = None,
        answer: str | None = None,
        redo: bool = False,
    ) -> None:
        """`redo`: a new version of the latest spine covering no more messages than it (`sessions
        resummarize` writing an LLM version of an extractive spine)."""
        lowest = max(self.spine_upto, 1) if redo else self.spine_upto + 1
        if not lowest <= upto_count <= self.message_count:
            raise InvalidInput(f"upto_count is {lowest} to {self.message_count}", field="upto_count")
        self._emit(
            self.SpineWritten,
            at,
            summary_key=summary_key_for(self.id, self.version + 1),
            version=self.spine_version + 1,
            sections=check_spine(sections),
            upto_count=upto_count,
            method=_check_method(method, model, prompt_version),
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def reject_summary(
        self,
        kind: SummaryKind | str,
        reason: str,
        at: datetime,
        *,
        model: str,
        prompt_version: str,
        session_id: UUID | None = None,
        answer: str | None = None,
    ) -> None:
        self._emit(
            self.SummaryRejected,
            at,
            summary_key=summary_key_for(self.id, self.version + 1),
            kind=SummaryKind(kind).value,
            session_id=session_id,
            reason=reason[:MAX_REASON_CHARS],
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def withdraw_summaries(self, count: int, at: datetime) -> None:
        """Record that `count` summary events were erased, with the counters as this conversation,
        replayed without them, has them (`SummariesWithdrawn`)."""
        self._emit(
            self.SummariesWithdrawn,
            at,
            count=count,
            rolling_versions=self.rolling_versions,
            rolled_turns=self.open["rolled_turns"] if self.open is not None else None,
            unsummarized=list(self.unsummarized),
            spine_version=self.spine_version,
            spine_upto=self.spine_upto,
            rejections=self.rejections,
            refused=dict(self.refused),
        )
