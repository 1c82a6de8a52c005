"""Context compaction (spec 003 §5, issue #12, ADR 0067): a session's history past a share of the
token budget becomes `[summary marker] + preserved messages`.

One `Compaction` per session (id `compaction_id_for(being, session)`). `Compacted` records that the
session's messages up to number `upto` are represented by `synthesis` (an LLM's, model, prompt
version and capped answer recorded) and the later ones are shown as they are; the messages stay in
the log. `upto` only grows, so a re-run of a compaction already recorded writes nothing. A refused
answer is `Rejected` and the work is asked again at the next tick.

Tokens are estimated offline (`estimate_tokens`): a UTF-8 byte count over four, plus four tokens a
message for its role and framing — close to the BPE tokenizers' counts for English prose, and
higher (safer) for other scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import InvalidInput, InvalidTransition

SLEEP_THRESHOLD = 0.70
"""Compact while asleep past this share of the budget (spec 003)."""
EMERGENCY_THRESHOLD = 0.80
"""…and while awake past this one (the emergency compaction)."""
PRESERVED_SHARE = 0.30
"""The newest messages kept as they are fill at most this share of the budget."""
MIN_PRESERVED = 2
"""…and are at least the last exchange."""
MESSAGE_OVERHEAD_TOKENS = 4
MAX_SYNTHESIS_CHARS = 4000
MAX_REASON_CHARS = 500
MARKER = "[summary of the earlier conversation]"


def compaction_id_for(being_id: UUID, session_id: UUID) -> UUID:
    return uuid5(being_id, f"compaction:{session_id}")


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, offline: UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode("utf-8")) // 4)


def message_tokens(text: str) -> int:
    return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True)
class Split:
    """What a compaction does: the messages numbered up to `upto` go into the synthesis."""

    upto: int
    compacted: int  # how many messages (not yet compacted) go into it
    tokens_before: int
    preserved_tokens: int


def plan_split(
    messages: Sequence[tuple[int, int]], synthesis_tokens: int, budget: int, threshold: float
) -> Split | None:
    """`messages`: (number, tokens) of the history not yet compacted, in order. None when the history
    (the synthesis so far and those messages) is within `threshold` of `budget`, or when nothing is
    left to compact once the newest messages are kept."""
    total = synthesis_tokens + sum(t for _, t in messages)
    if total <= threshold * budget:
        return None
    kept, kept_tokens = 0, 0
    for _, tokens in reversed(messages):
        if kept >= MIN_PRESERVED and kept_tokens + tokens > PRESERVED_SHARE * budget:
            break
        kept += 1
        kept_tokens += tokens
    compact = len(messages) - kept
    if compact <= 0:
        return None
    return Split(messages[compact - 1][0], compact, total, kept_tokens)


def check_synthesis(text: str) -> str:
    text = text.strip()
    if not text:
        raise InvalidInput("the synthesis is empty", field="synthesis")
    if len(text) > MAX_SYNTHESIS_CHARS:
        raise InvalidInput(
            f"a synthesis has at most {MAX_SYNTHESIS_CHARS} characters, got {len(text)}", field="synthesis"
        )
    return text


class Compaction(BeingScopedAggregate):
    TOPIC = "engram.Compaction"

    class Event(Aggregate.Event):
        TOPIC = "engram.Compaction.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.Compaction.Started"
        class_version = 1
        session_id: UUID
        user: str

    class Compacted(Event):
        """The session's messages up to number `upto` are shown as `synthesis` from now on."""

        TOPIC = "engram.Compaction.Compacted"
        class_version = 1
        upto: int
        compacted: int
        synthesis: str
        trigger: str  # sleep | emergency
        budget: int
        tokens_before: int
        preserved_tokens: int
        journal_note_id: UUID
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, c: Compaction) -> None:
            c.upto = self.upto
            c.synthesis = self.synthesis
            c.compactions += 1
            c.journal_note_id = self.journal_note_id

    class Rejected(Event):
        """An LLM answer for a synthesis was refused; the next tick asks again."""

        TOPIC = "engram.Compaction.Rejected"
        class_version = 1
        upto: int
        reason: str
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, c: Compaction) -> None:
            c.rejections += 1

    def __init__(self, being_id: UUID, session_id: UUID, user: str) -> None:
        self.being_id = being_id
        self.session_id = session_id
        self.user = user
        self.upto = 0
        self.synthesis: str | None = None
        self.compactions = 0
        self.rejections = 0
        self.journal_note_id: UUID | None = None

    @classmethod
    def start(cls, being_id: UUID, session_id: UUID, user: str, at: datetime) -> Compaction:
        found: Compaction = cls._create(
            cls.Started,
            id=compaction_id_for(being_id, session_id),
            being_id=being_id,
            session_id=session_id,
            user=user,
            timestamp=at,
        )
        return found

    def compact(
        self,
        split: Split,
        synthesis: str,
        *,
        trigger: str,
        budget: int,
        journal_note_id: UUID,
        model: str,
        prompt_version: str,
        answer: str | None,
        at: datetime,
    ) -> None:
        if split.upto <= self.upto:
            raise InvalidTransition(f"messages up to {self.upto} are compacted already")
        self._emit(
            self.Compacted,
            at,
            upto=split.upto,
            compacted=split.compacted,
            synthesis=check_synthesis(synthesis),
            trigger=trigger,
            budget=budget,
            tokens_before=split.tokens_before,
            preserved_tokens=split.preserved_tokens,
            journal_note_id=journal_note_id,
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )

    def reject(
        self, upto: int, reason: str, *, model: str, prompt_version: str, answer: str | None, at: datetime
    ) -> None:
        self._emit(
            self.Rejected,
            at,
            upto=upto,
            reason=reason[:MAX_REASON_CHARS],
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )
