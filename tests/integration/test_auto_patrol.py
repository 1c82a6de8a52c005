"""`engram worker` patrols a being by itself when its schedule says so."""

from __future__ import annotations

import json
from collections.abc import Callable
from uuid import UUID

from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.patrol.auto import AutoPatrol
from tests.support import SeededIds, SteppingClock


def scene(i: int) -> NoteInput:
    return NoteInput(
        text=json.dumps({"action": f"walked the dog, round {i}", "actors": ["me"], "when": ["2026-11-01"]})
    )


def test_patrols_the_being_that_is_due_and_only_once(make_settings: Callable[..., Settings]) -> None:
    e = bootstrap(
        make_settings(patrol_min_notes=3, patrol_check_s=0.001), clock=SteppingClock(), ids=SeededIds()
    )
    try:
        e.beings.register("Aria")
        e.beings.register("Bo")
        e.notes.take_many("Aria", [scene(i) for i in range(3)])
        e.notes.take_many("Bo", [scene(1)])  # one note, but Bo was never patrolled: due too
        auto = AutoPatrol(e)
        assert {e.views.read.being(UUID(b))["name"] for b, _ in auto.due()} == {"Aria", "Bo"}
        auto.tick()
        assert auto.patrols == 2
        assert auto.due() == []  # nothing new since
        aria = e.views.read.being_by_name("Aria")
        assert aria is not None and len(e.views.read.nodes(UUID(aria["id"]))) == 3
        e.notes.take(
            "Bo", scene(2)
        )  # one new note after a fresh patrol: below the threshold, interval not over
        assert auto.due() == []
    finally:
        e.close()
