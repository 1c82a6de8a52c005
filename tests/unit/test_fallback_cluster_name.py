"""A sub-cluster's name without an LLM (ADR 0007, amended by ADR 0093): never one member's words."""

from __future__ import annotations

from typing import Any

from engram.services.patrol.grouping import fallback_cluster_name


def _node(action: str, themes: list[str], created: str = "2026-11-28T09:00:00+00:00") -> dict[str, Any]:
    return {"action": action, "themes": themes, "created_at": created}


def test_a_theme_two_members_share_names_the_cluster() -> None:
    nodes = [
        _node("climbed the north ridge", ["climbing", "Ridge"]),
        _node("bouldering at the gym", [" climbing "]),
        _node("ridge walk", ["ridge"]),
    ]
    assert fallback_cluster_name(nodes) == "Climbing"  # 2 each: alphabetical


def test_a_theme_of_one_member_or_an_action_is_never_the_name() -> None:
    nodes = [
        _node("renew the secret passport", ["passport", "passport"], "2026-11-29T10:00:00+00:00"),
        _node("walked to the lake", ["lake"], "2026-11-28T08:00:00+00:00"),
        _node("walked to the river", []),
    ]
    name = fallback_cluster_name(nodes)
    assert name == "Memories from 2026-11-28"  # the earliest member's day
    assert not {"renew", "passport", "walked", "lake"} & set(name.lower().split())
    assert fallback_cluster_name([{"action": "x y z"}]) == "Untitled topic"
