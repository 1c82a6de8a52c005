"""One importance scale across Engram's memories (spec 003, issue #12, ADR 0060).

Each kind keeps its own scale: a node's importance is 0–1 (it drives decay, spec 000), a fact's is
0–3 (spec 004), a message's is Generative Agents' 1–10 poignancy (spec 003). Sleep's reflection adds
importance up across kinds and its threshold (150) is on the 1–10 scale, so each kind maps onto
it here, and only here.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

POIGNANCY_MIN = 1
POIGNANCY_MAX = 10

FACT_POIGNANCY = (1, 4, 7, 10)
"""A fact's importance 0, 1, 2, 3 on the 1–10 scale: evenly spread, 3 (pinned) at the top."""


def _clamp(value: float) -> int:
    return max(POIGNANCY_MIN, min(POIGNANCY_MAX, round(value)))


def node_poignancy(importance: float) -> int:
    """A node's 0–1 importance on the 1–10 scale: 0 → 1, 0.5 → 6 (5.5 rounds to even 6), 1 → 10."""
    return _clamp(1 + 9 * max(0.0, min(1.0, importance)))


def fact_poignancy(importance: int) -> int:
    return FACT_POIGNANCY[max(0, min(3, importance))]


def poignancy_to_node_importance(poignancy: int) -> float:
    """The inverse of `node_poignancy`, for what sleep writes as a node (a reflection's insight)."""
    return round((_clamp(poignancy) - 1) / 9, 4)


def poignancy_to_fact_importance(poignancy: int) -> int:
    """The fact importance whose poignancy is nearest (ties go to the higher importance)."""
    p = _clamp(poignancy)
    return min(range(4), key=lambda i: (abs(FACT_POIGNANCY[i] - p), -i))


# -- the heuristic (spec 003's "heuristic importance at intake", ADR 0061) ---------------------------

HEURISTIC_VERSION = "heuristic-2"
"""The version of the features below. The `importance` view derives heuristic scores from the intake
events with them, so changing a feature or a weight bumps this and the view's `schema_version` (the
view is rebuilt; LLM and given scores are events and stay what they were)."""


def _words(*items: str) -> frozenset[str]:
    return frozenset(w for item in items for w in item.split())


# Single words are looked up in the text's set of words; phrases (with a space) as substrings.
_LIFE_EVENT_WORDS = _words(
    "died dies death dead funeral born birth pregnant pregnancy wedding married marry engaged divorce",
    "divorced diagnosed diagnosis cancer hospital hospitalized surgery accident fired hired promoted",
    "promotion retired retirement graduated graduation miscarriage arrested emergency",
)
_LIFE_EVENT_PHRASES = ("passed away", "broke up", "laid off", "new job", "moved to", "moving to", "lost my")
_EMOTION_WORDS = _words(
    "love loved hate hated afraid scared terrified furious angry devastated heartbroken thrilled",
    "ecstatic overjoyed depressed anxious anxiety grief grieving crying cried ashamed proud lonely",
    "miserable panic panicked worried excited upset",
)
_COMMITMENT_WORDS = _words("promise promised promises deadline appointment commitment committed must")
_COMMITMENT_PHRASES = (
    "i will",
    "i'll",
    "we will",
    "we'll",
    "remind me",
    "don't forget",
    "do not forget",
    "due on",
    "due by",
    "agreed to",
    "need to",
    "have to",
)
_URGENCY_WORDS = _words("urgent urgently asap immediately emergency critical")
_URGENCY_PHRASES = ("right now", "help me")
# Words are what is left between spaces once punctuation and digits are spaces (faster than a regex).
_TO_SPACE = str.maketrans(dict.fromkeys(string.punctuation.replace("'", "") + string.digits, " "))
_DATE_OR_NUMBER = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}[:.]\d{2}\b|\b\d{1,2}\s?(?:am|pm)\b|\b\d+(?:[.,]\d+)?\s?(?:%|€|\$|£|"
    r"eur|usd|kg|km|years?|months?|weeks?|days?|hours?)|[€$£]\s?\d|\b(?:tomorrow|tonight|yesterday|"
    r"next (?:week|month|year)|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|"
    r"february|march|april|june|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_SMALL_TALK = re.compile(
    r"^(?:\W*(?:hi|hello|hey|ok|okay|thanks|thank you|thx|lol|yes|no|sure|cool|nice|bye|good night|"
    r"good morning)\W*)+$",
    re.IGNORECASE,
)
LONG_TEXT_CHARS = 200


@dataclass(frozen=True)
class TextFeatures:
    """What the heuristic sees in a text. Keyword lists are English; dates, numbers, names,
    questions, exclamations and length work in any language written in Latin script."""

    life_event: bool = False
    emotion: bool = False
    commitment: bool = False
    urgency: bool = False
    date_or_number: bool = False
    name: bool = False
    question: bool = False
    exclamation: bool = False
    long: bool = False
    small_talk: bool = False

    def points(self) -> int:
        """What the text's features add to a base score (documented in docs/sleep.md)."""
        return (
            4 * self.life_event
            + 2 * self.emotion
            + 2 * self.commitment
            + 2 * self.urgency
            + self.date_or_number
            + self.name
            + self.question
            + self.exclamation
            + self.long
            - self.small_talk
        )

    def names(self) -> list[str]:
        return [k for k, v in self.__dict__.items() if v]


def _has(words: frozenset[str], lower: str, found: frozenset[str], phrases: tuple[str, ...] = ()) -> bool:
    return not words.isdisjoint(found) or any(p in lower for p in phrases)


def text_features(text: str) -> TextFeatures:
    lower = text.lower()
    found = frozenset(lower.translate(_TO_SPACE).split())
    return TextFeatures(
        life_event=_has(_LIFE_EVENT_WORDS, lower, found, _LIFE_EVENT_PHRASES),
        emotion=_has(_EMOTION_WORDS, lower, found),
        commitment=_has(_COMMITMENT_WORDS, lower, found, _COMMITMENT_PHRASES),
        urgency=_has(_URGENCY_WORDS, lower, found, _URGENCY_PHRASES),
        date_or_number=_DATE_OR_NUMBER.search(text) is not None,
        name=_NAME.search(text) is not None,
        question="?" in text,
        exclamation="!" in text,
        long=len(text) > LONG_TEXT_CHARS,
        small_talk=_SMALL_TALK.match(text) is not None,
    )


def message_poignancy(*, text: str, role: str, urgent: bool, priority: int | None) -> int:
    """A message's heuristic importance on the 1–10 scale, offline (`HEURISTIC_VERSION`): a user's
    message starts at 2, the being's own answer at 1; the text's features add (`TextFeatures.points`);
    `urgent: true` adds 3; a caller's `priority` (0–10) is a floor. Never below 1 nor above 10, and
    never lower for a higher priority or for `urgent`."""
    score = (2 if role == "user" else 1) + text_features(text).points()
    if urgent:
        score += 3
    if priority is not None:
        score = max(score, priority)
    return _clamp(score)


NOTE_KIND_BASE: dict[str, int] = {
    "soul": 9,
    "rule": 7,
    "relationship": 6,
    "preference": 5,
    "todo": 5,
    "reminder": 5,
    "knowledge": 4,
    "summary": 4,
    "tool": 3,
    "map": 3,
    "log": 1,
}
"""Where a note's heuristic starts, by kind: what shapes the being (soul, rules) weighs more than
what records (a log line). A scene note is scored as its node (`scene_poignancy`)."""


def note_poignancy(*, kind: str, text: str) -> int:
    """A (non-scene) note's heuristic importance: its kind's base plus its text's features, halved —
    a note's kind already says much of what the features guess."""
    base = NOTE_KIND_BASE.get(kind, 3)
    return _clamp(base + max(0, text_features(text).points()) // 2)


def scene_poignancy(*, text: str, emotion: dict[str, float] | None, actors: int, themes: int) -> int:
    """A scene's heuristic importance when its caller gave none (its node decays from 0.5 all the
    same): 3, plus the features of its text (action, feeling, dialogue), plus a strong emotion
    (arousal ≥ 0.6: +2; |valence| ≥ 0.6: +1; safety ≤ −0.5: +2; novelty ≥ 0.7: +1), plus 1 for three
    actors or more, plus 1 for three themes or more."""
    score = 3 + text_features(text).points()
    e = emotion or {}
    score += 2 * (e.get("arousal", 0.0) >= 0.6) + (abs(e.get("valence", 0.0)) >= 0.6)
    score += 2 * (e.get("safety", 0.0) <= -0.5) + (e.get("novelty", 0.0) >= 0.7)
    score += (actors >= 3) + (themes >= 3)
    return _clamp(score)
