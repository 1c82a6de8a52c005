import json

import pytest

from engram.domain.errors import InvalidScene
from engram.domain.scene import ParseFailure, SceneInput, parse_scene_text, validate_scene_object

GOOD = {
    "action": "Shipped the beta to the first ten customers",
    "actors": ["me", "Mina"],
    "when": ["2026-11-20"],
    "setting": "office, late evening",
    "dialogue": ["We made it.", "Barely."],
    "feeling": "relieved and a little proud",
    "importance": 0.8,
    "themes": ["work", "launch", "work"],
    "emotion": {"valence": 0.7, "arousal": 0.6},
}


def test_flat_and_nested_forms_parse_alike() -> None:
    flat = parse_scene_text(json.dumps(GOOD))
    nested = validate_scene_object(
        {
            "scene": {k: GOOD[k] for k in ("action", "actors", "when", "setting", "dialogue")},
            **{k: GOOD[k] for k in ("feeling", "importance", "themes", "emotion")},
        }
    )
    assert isinstance(flat, SceneInput)
    assert flat == nested
    assert flat.themes == ["work", "launch"]


def test_scene_to_text_matches_the_spec_rendering() -> None:
    parsed = validate_scene_object(GOOD)
    assert parsed.scene.to_text(parsed.feeling) == (
        "2026-11-20 — office, late evening — Shipped the beta to the first ten customers — "
        '"We made it." — (relieved and a little proud)'
    )


def test_when_accepts_consolidated_entries() -> None:
    parsed = validate_scene_object(
        {**GOOD, "when": ["2026-11-20", {"date": "Day7", "action": "Hashi decided"}]}
    )
    assert parsed.scene.embed_text("").startswith("2026-11-20 Day7 Hashi decided")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"action": None}, "action"),
        ({"actors": []}, "actors"),
        ({"when": ["20-11-2026"]}, "when"),
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"emotion": {"valence": 2}}, "emotion.valence"),
        ({"emotion": {"arousal": -0.5}}, "emotion.arousal"),
        ({"emotion": {"joy": 1}}, "emotion.joy"),
        ({"mood": "x"}, "mood"),
    ],
)
def test_structured_scene_errors_name_the_field(change: dict[str, object], field: str) -> None:
    obj = {**GOOD, **change}
    obj = {k: v for k, v in obj.items() if v is not None}
    with pytest.raises(InvalidScene) as info:
        parse_scene_text(json.dumps(obj))
    assert field in {e["field"] for e in info.value.errors}


@pytest.mark.parametrize(
    "text", ["met Mina at the café, felt good", '{"action": "trunc', "[1, 2]", '"just a string"']
)
def test_text_that_is_no_json_object_is_a_parse_failure(text: str) -> None:
    result = parse_scene_text(text)
    assert isinstance(result, ParseFailure)
    assert result.reason
