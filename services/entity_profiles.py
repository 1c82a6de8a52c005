"""Entity profiles during dreaming (O-Mem, spec 003, issue #12, ADR 0064): two sleep steps and the
reads of the profiles.

- `entity_observations` (offline): the facts and user messages that came in since the being's
  `ObservationCursor`, a bounded batch per tick, become observations of the entities they name (a
  fact's entity refs and subject; a user's message, of `person:<user>`), merges followed; a user's
  messages are interactions and move the favorability (`domain.entity_profile.favorability_after`).
  A fact's subject that is a user id is the person `person:<user>`. The profiles and the cursor are
  saved in one transaction: a re-run tick finds the batch done.
- `entity_consolidation` (LLM): a few profiles per tick whose observations the attributes do not hold
  yet are folded into attributes; the validated answer, model, prompt version and capped answer are
  recorded, a bad answer is recorded as refused and asked again next tick. Skipped without an LLM.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import structlog
from pydantic import BaseModel

from engram.domain.entities import check_entity_ref, entity_slug
from engram.domain.entity_profile import (
    EntityProfile,
    ObservationCursor,
    check_attributes,
    dunbar_state,
    observation,
    observation_cursor_id,
    profile_id_for,
    valence,
)
from engram.domain.errors import InvalidInput
from engram.domain.fact import LORE_SUBJECT
from engram.projections.facts import FACTS
from engram.services.beings import resolve_being_id
from engram.services.dream_prompts import (
    CONSOLIDATE_TASK,
    DREAM_PROMPT_VERSION,
    AttributesAnswer,
    Bad,
    Later,
    ask_checked,
    consolidation_prompt,
    texts_problem,
)
from engram.services.errors import NotFound
from engram.services.fact_search import resolve_ref
from engram.services.sleep import StepContext, StepResult

if TYPE_CHECKING:
    from engram.services.bootstrap import Engram

log = structlog.get_logger("engram.profiles")

OBSERVE_BATCH = 200
"""Facts and messages a tick turns into observations."""
CONSOLIDATE_PER_TICK = 3
"""Profiles a tick asks the LLM to consolidate."""
NO_LLM = "no LLM configured"


@dataclass(frozen=True)
class Item:
    position: int
    kind: str  # fact | message
    row: dict[str, Any]


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def person_ref(user: str) -> str | None:
    """The entity a conversation's user is: `person:<slug>` (None when the name has no slug)."""
    try:
        return check_entity_ref(f"person:{entity_slug(user)}")
    except InvalidInput:
        return None


class EntityObservations:
    name = "entity_observations"
    phase = "dreaming"

    def __init__(self, engram: Engram, batch: int = OBSERVE_BATCH) -> None:
        self.e = engram
        self.batch = batch

    def _cursor(self, being_id: UUID) -> ObservationCursor | None:
        return self.e.store.find(ObservationCursor, observation_cursor_id(being_id))

    def _items(self, being_id: UUID, after: int, limit: int) -> tuple[list[Item], bool]:
        """The being's facts (its own and its spaces') and messages written after `after`, in log order:
        the first `limit`, and whether there are more."""
        views = self.e.views
        views.ensure(names=["facts", "conversations"], being=being_id)
        owners = views.facts.owners(being_id)
        facts = views.read._select(
            "facts",
            FACTS,
            f"owner_id IN ({_marks(owners)}) AND position > ?",
            [*owners, after],
            f"ORDER BY position LIMIT {int(limit) + 1}",
        )
        messages = views.conversations.messages_written_after(being_id, after, limit + 1)
        items = sorted(
            [Item(int(r["position"]), "fact", r) for r in facts]
            + [Item(int(r["position"]), "message", r) for r in messages],
            key=lambda i: i.position,
        )
        return items[:limit], len(items) > limit

    def pending(self, being_id: UUID) -> int | None:
        cursor = self._cursor(being_id)
        items, more = self._items(being_id, cursor.position if cursor else 0, 1000)
        return len(items) + (1 if more else 0)

    def _refs(self, item: Item, aliases: dict[str, str]) -> list[str]:
        row = item.row
        refs: list[str] = []
        if item.kind == "message":
            ref = person_ref(str(row["user_id"])) if row["role"] == "user" else None
            if ref is not None:
                refs.append(ref)
        elif row["status"] == "active":
            refs.extend(json.loads(row["entity_refs_json"] or "[]"))
            subject = str(row["subject"] or "")
            if ":" in subject:
                with contextlib.suppress(InvalidInput):
                    refs.append(check_entity_ref(subject))
            elif subject and subject != LORE_SUBJECT:  # a user id (spec 004): that person
                ref = person_ref(subject)
                if ref is not None:
                    refs.append(ref)
        return list(dict.fromkeys(resolve_ref(r, aliases) for r in refs))

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        cursor = self._cursor(being_id)
        items, more = self._items(being_id, cursor.position if cursor else 0, self.batch)
        if not items:
            return StepResult()
        views = self.e.views
        aliases = views.facts.aliases(views.facts.owners(being_id))
        seen: dict[str, list[dict[str, Any]]] = {}
        valences: dict[str, list[float]] = {}
        for item in items:
            for ref in self._refs(item, aliases):
                text = str(item.row["text"])
                at = str(item.row["at"] if item.kind == "message" else item.row["updated_at"])
                seen.setdefault(ref, []).append(
                    observation(item.kind, str(item.row["id"]), text, at, item.position)
                )
                if item.kind == "message":
                    valences.setdefault(ref, []).append(valence(text))
        end = items[-1].position

        def handle() -> int:
            now = self.e.clock.now()
            mark = self._cursor(being_id) or ObservationCursor.start(being_id, now)
            if not mark.advance(end, len(items), now):
                return 0  # a re-run: this batch was recorded
            changed: list[EntityProfile] = []
            for ref, obs in seen.items():
                pid = profile_id_for(being_id, ref)
                profile = self.e.store.find(EntityProfile, pid) or EntityProfile.start(being_id, ref, now)
                if profile.observe(obs, valences.get(ref, []), end, now) or profile.pending_events:
                    changed.append(profile)
            self.e.store.save(mark, *changed)
            return len(changed)

        profiles = self.e.runner.run("observe_entities", handle, being_id=being_id)
        return StepResult(done=len(items), remaining=more, details={"profiles": profiles})


class EntityConsolidation:
    name = "entity_consolidation"
    phase = "dreaming"

    def __init__(self, engram: Engram, per_tick: int = CONSOLIDATE_PER_TICK) -> None:
        self.e = engram
        self.per_tick = per_tick

    def pending(self, being_id: UUID) -> int | None:
        self.e.views.ensure(names=["profiles"], being=being_id)
        return self.e.views.profiles.unfolded_count(being_id)

    def run(self, being_id: UUID, ctx: StepContext) -> StepResult:
        if not ctx.llm_available:
            return StepResult(skipped=NO_LLM)
        self.e.views.ensure(names=["profiles"], being=being_id)
        rows = self.e.views.profiles.unfolded(being_id, self.per_tick + 1)
        kept = refused = later = 0
        for row in rows[: self.per_tick]:
            if ctx.stopping():
                break
            outcome = self._one(being_id, UUID(str(row["id"])))
            kept += outcome == "kept"
            refused += outcome == "refused"
            later += outcome == "later"
        return StepResult(
            done=kept,
            remaining=len(rows) > self.per_tick or refused > 0 or later > 0,
            details={"refused": refused, "deferred": later},
        )

    def _one(self, being_id: UUID, profile_id: UUID) -> str:
        profile = self.e.store.get(EntityProfile, profile_id, being_id=being_id)
        if profile.unfolded <= 0:
            return "none"
        shown = profile.observations[-min(profile.unfolded, len(profile.observations)) :]
        folded = profile.observed
        prompt = consolidation_prompt(profile.ref, profile.attributes, shown)
        llm = self.e.llm
        asked = ask_checked(
            llm,
            CONSOLIDATE_TASK,
            prompt,
            AttributesAnswer,
            max_answer_bytes=self.e.settings.llm_max_answer_kib * 1024,
        )
        if isinstance(asked, Later):
            log.warning("entity consolidation deferred", ref=profile.ref, reason=asked.reason)
            return "later"
        attributes: dict[str, str] = {}
        reason: str | None = None
        if isinstance(asked, Bad):
            reason = asked.reason
        else:
            assert isinstance(asked.plan, AttributesAnswer)
            try:
                attributes = check_attributes([(a.name, a.value) for a in asked.plan.attributes])
            except InvalidInput as exc:
                reason = f"the answer breaks the profile's bounds: {exc.message}"
            else:
                reason = texts_problem(
                    [*attributes, *attributes.values()], [str(o["text"]) for o in shown], "an attribute"
                )

        def handle() -> str:
            now = self.e.clock.now()
            fresh = self.e.store.get(EntityProfile, profile_id, being_id=being_id)
            if fresh.folded >= folded:
                return "none"  # consolidated meanwhile
            if reason is not None:
                fresh.refuse(reason, asked.model, DREAM_PROMPT_VERSION, asked.answer, now)
            else:
                fresh.consolidate(attributes, folded, asked.model, DREAM_PROMPT_VERSION, asked.answer, now)
            self.e.store.save(fresh)
            return "refused" if reason is not None else "kept"

        if reason is not None:
            log.warning("entity consolidation refused", ref=profile.ref, reason=reason)
        return self.e.runner.run("consolidate_entity", handle, being_id=being_id)


# -- reads ---------------------------------------------------------------------------------------


class Observation(BaseModel):
    kind: str
    source_id: str
    text: str
    at: str
    position: int


class Relationship(BaseModel):
    state: str
    favorability: float
    interaction_count: int


class Profile(BaseModel):
    ref: str
    asked: str
    merged_into: str | None
    attributes: dict[str, str]
    observations: list[Observation]
    relationship: Relationship
    observed: int
    folded: int
    consolidated_by: str | None
    refused: str | None
    updated_at: str

    def text(self) -> str:
        r = self.relationship
        lines = []
        if self.merged_into:
            lines.append(f"{self.asked} is merged into {self.ref}")
        lines.append(
            f"{self.ref}: {r.state} (favorability {r.favorability:.2f}, {r.interaction_count} interactions)"
        )
        if self.attributes:
            lines.append("attributes:")
            lines += [f"  {k}: {v}" for k, v in sorted(self.attributes.items())]
        else:
            lines.append("attributes: none yet" + ("" if self.consolidated_by else " (not consolidated)"))
        if self.observations:
            lines.append(f"recent observations ({self.observed - self.folded} not yet folded):")
            lines += [f"  - [{o.kind} {o.at}] {o.text}" for o in reversed(self.observations)]
        if self.refused:
            lines.append(f"last answer refused: {self.refused}")
        return "\n".join(lines)


def _profile(row: dict[str, Any], asked: str) -> Profile:
    return Profile(
        ref=row["ref"],
        asked=asked,
        merged_into=row["ref"] if row["ref"] != asked else None,
        attributes=row["attributes"] or {},
        observations=[Observation(**o) for o in row["observations"] or []],
        relationship=Relationship(
            state=dunbar_state(float(row["favorability"])),
            favorability=float(row["favorability"]),
            interaction_count=int(row["interaction_count"]),
        ),
        observed=int(row["observed"]),
        folded=int(row["folded"]),
        consolidated_by=row["consolidated_by"],
        refused=row["refused"],
        updated_at=row["updated_at"],
    )


class EntityProfiles:
    """`engram entities profile`, `GET /v1/beings/{being}/profiles[/{ref}]`, the MCP `entity_profile`."""

    def __init__(self, engram: Engram) -> None:
        self.e = engram

    def _ready(self, being_ref: str | UUID) -> UUID:
        being_id = resolve_being_id(self.e.store, being_ref)
        self.e.views.ensure(names=["facts", "profiles"], being=being_id)
        return being_id

    def profile(self, being_ref: str | UUID, ref: str) -> Profile:
        asked = check_entity_ref(ref, "ref")
        being_id = self._ready(being_ref)
        aliases = self.e.views.facts.aliases(self.e.views.facts.owners(being_id))
        target = resolve_ref(asked, aliases)
        row = self.e.views.profiles.profile(being_id, target)
        if row is None:
            raise NotFound(f"no profile of {asked} yet: profiles are built while the being dreams")
        return _profile(row, asked)

    def profiles(self, being_ref: str | UUID) -> list[Profile]:
        being_id = self._ready(being_ref)
        return [_profile(r, r["ref"]) for r in self.e.views.profiles.profiles(being_id)]
