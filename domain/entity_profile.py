"""Entity profiles (O-Mem, spec 003, issue #12, ADR 0064): what a being knows of each entity of its
facts (#11), and its relationship with it.

A profile holds `attributes` (consolidated by the LLM from the observations: stable), the recent raw
`observations` (facts about or mentioning the entity; for a person who is a conversation's user, their
messages; the newest `MAX_OBSERVATIONS` kept), and a relationship: `favorability` 0–1, its Dunbar
`state` and the `interaction_count`.

The favorability rule is pure and offline (`favorability_after`): each interaction (a user's message)
moves it by `FAMILIARITY + EMOTION_WEIGHT × valence`, clamped to 0–1, where `valence` (−1…1) is read
from the message's words (`valence`). Talking at all brings a being closer; warmth more, hostility
pushes it away.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.entities import check_entity_ref
from engram.domain.errors import InvalidInput

MAX_OBSERVATIONS = 20
"""Recent raw observations a profile keeps (older ones live on in their facts and messages)."""
MAX_OBSERVATION_CHARS = 500
MAX_ATTRIBUTES = 24
MAX_ATTRIBUTE_NAME_CHARS = 40
MAX_ATTRIBUTE_VALUE_CHARS = 300

FAMILIARITY = 0.01
"""What any interaction adds: 25 neutral messages make a stranger an acquaintance."""
EMOTION_WEIGHT = 0.05
"""What an interaction's valence (−1…1) adds on top: a warm message +0.06, a hostile one −0.04."""

# Dunbar's layers as favorability thresholds (spec 003): the state is the highest whose floor is reached.
DUNBAR = (("stranger", 0.0), ("acquaintance", 0.25), ("friend", 0.50), ("ally", 0.75))

_WORD = re.compile(r"[\w']+", re.UNICODE)


def _lexicon(words: str) -> frozenset[str]:
    return frozenset(words.split())


POSITIVE = _lexicon(
    "thanks thank thx love loved lovely great glad happy wonderful awesome amazing appreciate "
    "appreciated kind helpful nice excellent fantastic brilliant perfect enjoy enjoyed enjoying "
    "delighted grateful cheers yay fun good best beautiful sweet"
)
NEGATIVE = _lexicon(
    "hate hated angry annoyed annoying terrible awful useless stupid idiot worst horrible bad "
    "disappointed disappointing furious rude wrong upset sad shut boring sucks liar lied"
)


def profile_id_for(being_id: UUID, ref: str) -> UUID:
    """One profile per (being, canonical entity ref): a re-run tick finds it, never makes a second."""
    return uuid5(being_id, "entity-profile:" + ref)


def dunbar_state(favorability: float) -> str:
    """stranger < 0.25 ≤ acquaintance < 0.50 ≤ friend < 0.75 ≤ ally."""
    state = DUNBAR[0][0]
    for name, floor in DUNBAR:
        if favorability >= floor:
            state = name
    return state


def valence(text: str) -> float:
    """The emotion of a text as −1…1, from its words (offline): (positive − negative) / their sum,
    0 when it has neither."""
    words = [w.lower() for w in _WORD.findall(text)]
    pos = sum(1 for w in words if w in POSITIVE)
    neg = sum(1 for w in words if w in NEGATIVE)
    return 0.0 if pos + neg == 0 else (pos - neg) / (pos + neg)


def favorability_after(favorability: float, valences: Iterable[float]) -> float:
    """The favorability after interactions of these valences, in order: each adds `FAMILIARITY +
    EMOTION_WEIGHT × valence` (valence clamped to −1…1), the result clamped to 0–1 at every step."""
    f = min(1.0, max(0.0, favorability))
    for v in valences:
        v = min(1.0, max(-1.0, v))
        f = min(1.0, max(0.0, f + FAMILIARITY + EMOTION_WEIGHT * v))
    return round(f, 6)


def check_attributes(items: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The attributes an LLM proposed, as the profile keeps them; `InvalidInput` naming what breaks."""
    if len(items) > MAX_ATTRIBUTES:
        raise InvalidInput(
            f"a profile has at most {MAX_ATTRIBUTES} attributes, got {len(items)}", field="attributes"
        )
    out: dict[str, str] = {}
    for i, (name, value) in enumerate(items):
        name, value = name.strip(), value.strip()
        if not name or len(name) > MAX_ATTRIBUTE_NAME_CHARS:
            raise InvalidInput(
                f"an attribute's name has 1 to {MAX_ATTRIBUTE_NAME_CHARS} characters",
                field=f"attributes.{i}.name",
            )
        if not value or len(value) > MAX_ATTRIBUTE_VALUE_CHARS:
            raise InvalidInput(
                f"an attribute's value has 1 to {MAX_ATTRIBUTE_VALUE_CHARS} characters",
                field=f"attributes.{i}.value",
            )
        out[name] = value
    return out


def observation(kind: str, source_id: str, text: str, at: str, position: int) -> dict[str, Any]:
    """One raw observation as a profile records it (`kind`: fact | message)."""
    return {
        "kind": kind,
        "source_id": source_id,
        "text": text[:MAX_OBSERVATION_CHARS],
        "at": at,
        "position": position,
    }


class EntityProfile(BeingScopedAggregate):
    """One entity as one being knows it; id `profile_id_for(being, ref)`."""

    TOPIC = "engram.EntityProfile"

    class Event(Aggregate.Event):
        TOPIC = "engram.EntityProfile.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.EntityProfile.Started"
        class_version = 1
        ref: str

    class Observed(Event):
        """New observations and interactions, up to log `up_to_position`; the favorability they gave."""

        TOPIC = "engram.EntityProfile.Observed"
        class_version = 1
        observations: list[dict[str, Any]]
        interactions: int
        valences: list[float]
        favorability: float
        up_to_position: int

        def apply(self, p: EntityProfile) -> None:
            p.observations = (p.observations + list(self.observations))[-MAX_OBSERVATIONS:]
            p.observed += len(self.observations)
            p.interaction_count += self.interactions
            p.favorability = self.favorability
            p.up_to_position = self.up_to_position

    class Consolidated(Event):
        """The LLM folded the first `folded` observations into `attributes` (its answer recorded)."""

        TOPIC = "engram.EntityProfile.Consolidated"
        class_version = 1
        attributes: dict[str, str]
        folded: int
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, p: EntityProfile) -> None:
            p.attributes = dict(self.attributes)
            p.folded = self.folded
            p.refused = None

    class ConsolidationRefused(Event):
        """An answer that could not be kept: why, and what it was (capped); asked again next tick."""

        TOPIC = "engram.EntityProfile.ConsolidationRefused"
        class_version = 1
        reason: str
        model: str
        prompt_version: str
        answer: str | None

        def apply(self, p: EntityProfile) -> None:
            p.refused = self.reason

    def __init__(self, being_id: UUID, ref: str) -> None:
        self.being_id = being_id
        self.ref = ref
        self.attributes: dict[str, str] = {}
        self.observations: list[dict[str, Any]] = []
        self.observed = 0  # observations ever recorded
        self.folded = 0  # of which the attributes hold
        self.interaction_count = 0
        self.favorability = 0.0
        self.up_to_position = 0
        self.refused: str | None = None

    @classmethod
    def start(cls, being_id: UUID, ref: str, at: datetime) -> EntityProfile:
        check_entity_ref(ref, "ref")
        p: EntityProfile = cls._create(
            cls.Started, id=profile_id_for(being_id, ref), being_id=being_id, ref=ref, timestamp=at
        )
        return p

    @property
    def state(self) -> str:
        return dunbar_state(self.favorability)

    @property
    def unfolded(self) -> int:
        return self.observed - self.folded

    def observe(
        self, observations: Sequence[dict[str, Any]], valences: Sequence[float], up_to: int, at: datetime
    ) -> bool:
        """Record what came in after `up_to_position` up to `up_to` (observations, and the interactions'
        valences); False when it was recorded already (a re-run tick)."""
        if up_to <= self.up_to_position:
            return False
        fresh = [o for o in observations if int(o["position"]) > self.up_to_position]
        if not fresh and not valences:
            return False
        self._emit(
            self.Observed,
            at,
            observations=fresh[-MAX_OBSERVATIONS:],
            interactions=len(valences),
            valences=[round(v, 4) for v in valences],
            favorability=favorability_after(self.favorability, valences),
            up_to_position=up_to,
        )
        return True

    def consolidate(
        self,
        attributes: dict[str, str],
        folded: int,
        model: str,
        prompt_version: str,
        answer: str | None,
        at: datetime,
    ) -> bool:
        """The attributes now hold the first `folded` observations; False when they did already."""
        if folded <= self.folded or folded > self.observed:
            return False
        self._emit(
            self.Consolidated,
            at,
            attributes=attributes,
            folded=folded,
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )
        return True

    def refuse(self, reason: str, model: str, prompt_version: str, answer: str | None, at: datetime) -> None:
        self._emit(
            self.ConsolidationRefused,
            at,
            reason=reason,
            model=model,
            prompt_version=prompt_version,
            answer=answer,
        )


def observation_cursor_id(being_id: UUID) -> UUID:
    return uuid5(being_id, "entity-observations")


class ObservationCursor(BeingScopedAggregate):
    """How far in the log a being's entity observations were gathered (facts and messages that came
    in or changed after `position` are still to observe). Saved with the profiles it fed."""

    TOPIC = "engram.ObservationCursor"

    class Event(Aggregate.Event):
        TOPIC = "engram.ObservationCursor.Event"
        being_id: UUID

    class Started(Event, Aggregate.Created):
        TOPIC = "engram.ObservationCursor.Started"
        class_version = 1

    class Advanced(Event):
        TOPIC = "engram.ObservationCursor.Advanced"
        class_version = 1
        position: int
        items: int

        def apply(self, c: ObservationCursor) -> None:
            c.position = self.position

    def __init__(self, being_id: UUID) -> None:
        self.being_id = being_id
        self.position = 0

    @classmethod
    def start(cls, being_id: UUID, at: datetime) -> ObservationCursor:
        c: ObservationCursor = cls._create(
            cls.Started, id=observation_cursor_id(being_id), being_id=being_id, timestamp=at
        )
        return c

    def advance(self, position: int, items: int, at: datetime) -> bool:
        if position <= self.position:
            return False
        self._emit(self.Advanced, at, position=position, items=items)
        return True
