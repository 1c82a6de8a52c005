"""Scenes: what a memory node remembers (spec 000, "Scene Format").

`SceneInput` is what a caller notes: the scene's fields plus `feeling`,
`importance`, `themes` and an optional VADSNT `emotion`. Notes keep the raw
text exactly as received; this module decides whether that text is a scene.

Two kinds of failure are told apart (ADR 0003):
- text that is not a JSON object at all (prose, a truncated line) is kept as a
  scene note that failed to parse, for repair by patrol (`ParseFailure`);
- a JSON object that breaks the schema (missing `action`, importance 1.4) is
  rejected at intake with every problem listed (`InvalidScene`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from engram.domain.errors import InvalidScene
from engram.domain.text import storable, text_problems

MAX_SCENE_TEXT_BYTES = 64 * 1024
"""A scene note's raw text, UTF-8 encoded. Larger texts are refused before parsing."""

ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
LongText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]
Line = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


def _iso_date(value: str) -> str:
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a date in the form YYYY-MM-DD") from None
    if len(value) != 10:
        raise ValueError(f"{value!r} is not a date in the form YYYY-MM-DD")
    return value


class WhenEntry(BaseModel):
    """The object form of a timeline entry, written by consolidation (❹).

    `date` is usually `YYYY-MM-DD`; free labels such as the spec's `"Day7"` are
    accepted in this form only, because consolidated history may carry them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    date: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
    action: LongText


WhenItem = str | WhenEntry


class Emotion(BaseModel):
    """VADSNT. Bipolar axes lie in [−1, 1], intensity axes in [0, 1]; unset axes are neutral (0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    valence: float = Field(0.0, ge=-1.0, le=1.0, description="unpleasant (−1) … pleasant (+1)")
    arousal: float = Field(0.0, ge=0.0, le=1.0, description="calm (0) … excited (1)")
    dominance: float = Field(0.0, ge=-1.0, le=1.0, description="overwhelmed (−1) … in control (+1)")
    safety: float = Field(0.0, ge=-1.0, le=1.0, description="threatened (−1) … safe (+1)")
    novelty: float = Field(0.0, ge=0.0, le=1.0, description="familiar (0) … new (1)")
    trust: float = Field(0.0, ge=-1.0, le=1.0, description="distrust (−1) … trust (+1)")


class Scene(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: LongText
    actors: Annotated[list[ShortText], Field(min_length=1, max_length=64)]
    when: Annotated[list[WhenItem], Field(min_length=1, max_length=500)]
    setting: LongText | None = None
    dialogue: Annotated[list[Line], Field(max_length=64)] | None = None
    sensory: Annotated[list[Line], Field(max_length=64)] | None = None

    @field_validator("when")
    @classmethod
    def _plain_dates_are_iso(cls, items: list[WhenItem]) -> list[WhenItem]:
        for item in items:
            if isinstance(item, str):
                _iso_date(item)
        return items

    def first_date(self) -> str | None:
        for item in self.when:
            return item if isinstance(item, str) else item.date
        return None

    def to_text(self, feeling: str) -> str:
        """The spec's `sceneToText`: `YYYY-MM-DD — setting — action — "first dialogue line" — (feeling)`."""
        parts: list[str] = []
        date = self.first_date()
        if date:
            parts.append(date)
        if self.setting:
            parts.append(self.setting)
        parts.append(self.action)
        if self.dialogue:
            parts.append(f'"{self.dialogue[0]}"')
        if feeling:
            parts.append(f"({feeling})")
        return " — ".join(parts)

    def embed_text(self, feeling: str) -> str:
        """The spec's `nodeToEmbedText(when + action + feeling)`."""
        when = " ".join(item if isinstance(item, str) else f"{item.date} {item.action}" for item in self.when)
        return " ".join(p for p in (when, self.action, feeling) if p)


class SceneInput(BaseModel):
    """A noted scene: the scene plus the node-level fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: Scene
    feeling: Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)] = ""
    importance: float | None = Field(None, ge=0.0, le=1.0)
    themes: Annotated[list[ShortText], Field(max_length=32)] = []
    emotion: Emotion | None = None

    @field_validator("themes")
    @classmethod
    def _dedupe_themes(cls, themes: list[str]) -> list[str]:
        return list(dict.fromkeys(themes))


_NODE_FIELDS = {"feeling", "importance", "themes", "emotion"}


def _nest(obj: dict[str, Any]) -> dict[str, Any]:
    """Accept both the flat form (`{"action": …, "feeling": …}`) and the nested one (`{"scene": {…}, …}`)."""
    if isinstance(obj.get("scene"), dict):
        return obj
    scene = {k: v for k, v in obj.items() if k not in _NODE_FIELDS}
    rest = {k: v for k, v in obj.items() if k in _NODE_FIELDS}
    return {"scene": scene, **rest}


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """Text kept as a scene note although it is not a scene; patrol may repair it."""

    reason: str


def _error_list(exc: ValidationError) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = [str(p) for p in err["loc"] if p != "scene"]
        out.append({"field": ".".join(loc) or "scene", "message": err["msg"]})
    return out


def _field(path: str) -> str:
    return path.removeprefix("scene.") if path != "scene" else path


def validate_scene_object(obj: dict[str, Any]) -> SceneInput:
    """Validate a JSON object as a scene; raise `InvalidScene` listing every problem.

    Text that no store could keep (NUL, a lone surrogate: domain/text.py), anywhere in the object, is
    one of the problems, named by its path (`actors.1`); the rest of the object is still checked.
    """
    return _validated(obj, may_hold_unstorable=True)


def _validated(obj: dict[str, Any], *, may_hold_unstorable: bool) -> SceneInput:
    nested = _nest(obj)
    errors = (
        [{"field": _field(path), "message": problem} for path, problem in text_problems(nested)]
        if may_hold_unstorable
        else []
    )
    try:
        scene = SceneInput.model_validate(storable(nested) if errors else nested)
    except ValidationError as exc:
        errors += _error_list(exc)
    if errors:
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise InvalidScene(f"invalid scene: {summary}", errors) from None
    return scene


_MAY_DECODE_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]|\\u(?:[dD][89a-fA-F]|0000)")
"""JSON text whose strings may hold NUL or a lone surrogate: the characters themselves, or an escape
that may decode to one. Text without any (nearly all) needs no walk through the parsed object."""


def _may_decode_unstorable(text: str) -> bool:
    # ASCII text with no escape and no NUL (nearly all) is ruled out without the pattern.
    if text.isascii() and "\\u" not in text and "\x00" not in text:
        return False
    return _MAY_DECODE_UNSTORABLE.search(text) is not None


def parse_scene_text(text: str) -> SceneInput | ParseFailure:
    """Parse a scene note's raw text.

    Returns the scene, or a `ParseFailure` when the text is not a JSON object
    at all. Raises `InvalidScene` for a JSON object that breaks the schema.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParseFailure(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(obj, dict):
        return ParseFailure(f"not a JSON object but a JSON {type(obj).__name__}")
    return _validated(obj, may_hold_unstorable=_may_decode_unstorable(text))
