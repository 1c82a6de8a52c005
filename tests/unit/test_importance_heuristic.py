"""The heuristic importance of spec 003 at intake (issue #12, ADR 0061): documented features, always
1-10, monotone where the caller says how important a message is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engram.domain.importance import (
    NOTE_KIND_BASE,
    message_poignancy,
    note_poignancy,
    scene_poignancy,
    text_features,
)

texts = st.text(max_size=400)
roles = st.sampled_from(["user", "assistant"])
priorities = st.one_of(st.none(), st.integers(0, 10))


def _user(text: str, *, urgent: bool = False, priority: int | None = None) -> int:
    return message_poignancy(text=text, role="user", urgent=urgent, priority=priority)


def test_each_feature_is_seen_and_adds_what_the_docs_say() -> None:
    assert text_features("hello there").names() == []
    assert _user("hello there") == 2
    assert text_features("ok thanks!").small_talk and _user("ok thanks") == 1
    assert text_features("my mother died today").names() == ["life_event"]
    assert _user("my mother died today") == 6
    assert text_features("I am so anxious about it").emotion
    assert text_features("I promise to send it").commitment
    assert text_features("this is urgent").urgency
    assert text_features("we meet on 2026-12-01").date_or_number
    assert text_features("dinner costs 40 €").date_or_number
    assert text_features("I saw Tomas yesterday").name
    assert not text_features("Hello there").name  # a capital at the start is not a name
    assert text_features("where are you?").question
    assert text_features("x" * 201).long
    full = "I promise I will tell Anna that Grandpa died on Monday at 10:00, I am devastated! Why?"
    assert _user(full) == 10  # 2 + life 4 + emotion 2 + promise 2 + date + name + question + !: capped
    assert message_poignancy(text="hello there", role="assistant", urgent=False, priority=None) == 1


def test_urgency_and_priority_of_the_caller() -> None:
    assert _user("hello there", urgent=True) == 5
    assert _user("hello there", priority=9) == 9
    assert _user("my mother died today", priority=3) == 6  # a priority is a floor, never a cap


@given(texts, roles, st.booleans(), priorities)
def test_a_message_always_scores_1_to_10(text: str, role: str, urgent: bool, priority: int | None) -> None:
    assert 1 <= message_poignancy(text=text, role=role, urgent=urgent, priority=priority) <= 10


@given(texts, roles, st.booleans(), st.integers(0, 9))
def test_a_higher_priority_never_lowers_the_score(text: str, role: str, urgent: bool, p: int) -> None:
    low = message_poignancy(text=text, role=role, urgent=urgent, priority=p)
    assert message_poignancy(text=text, role=role, urgent=urgent, priority=p + 1) >= low
    assert message_poignancy(text=text, role=role, urgent=urgent, priority=None) <= max(
        low, message_poignancy(text=text, role=role, urgent=urgent, priority=10)
    )


@given(texts, roles, priorities)
def test_urgent_never_lowers_the_score(text: str, role: str, priority: int | None) -> None:
    calm = message_poignancy(text=text, role=role, urgent=False, priority=priority)
    assert message_poignancy(text=text, role=role, urgent=True, priority=priority) >= calm


@given(st.sampled_from([*NOTE_KIND_BASE, "other"]), texts)
def test_a_note_scores_1_to_10_and_never_below_its_kinds_base(kind: str, text: str) -> None:
    score = note_poignancy(kind=kind, text=text)
    assert 1 <= score <= 10
    assert score >= min(NOTE_KIND_BASE.get(kind, 3), 10)


def test_notes_by_kind() -> None:
    assert note_poignancy(kind="soul", text="I am Ada") == 9
    assert note_poignancy(kind="log", text="job 17 ran") == 1
    assert note_poignancy(kind="todo", text="Call the hospital tomorrow about Mum's surgery") == 8


@given(
    texts,
    st.dictionaries(
        st.sampled_from(["valence", "arousal", "safety", "novelty"]), st.floats(-1, 1), max_size=4
    ),
    st.integers(0, 10),
    st.integers(0, 10),
)
def test_a_scene_scores_1_to_10(text: str, emotion: dict[str, float], actors: int, themes: int) -> None:
    assert 1 <= scene_poignancy(text=text, emotion=emotion, actors=actors, themes=themes) <= 10


def test_a_scenes_emotion_and_people_count() -> None:
    calm = scene_poignancy(text="we walked home", emotion=None, actors=1, themes=0)
    assert calm == 3
    tense = scene_poignancy(
        text="we walked home", emotion={"arousal": 0.8, "safety": -0.7}, actors=3, themes=3
    )
    assert tense == 3 + 2 + 2 + 1 + 1
