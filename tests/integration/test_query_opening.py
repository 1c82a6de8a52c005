"""`query` favours the memory that opens its day (ADR 0090), on both backends; and the query-side
variants of `engram bench locomo-logic --feedback` (`bench/locomo_feedback.py`, ADR 0091)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from uuid import UUID

import numpy as np
import pytest
from click.testing import CliRunner

from bench import locomo_feedback as fb
from bench import locomo_tuning as tuning
from engram.adapters.cli.main import cli
from engram.services.bootstrap import Engram
from engram.services.config import Settings
from engram.services.ranking import PROFILES
from tests.integration import test_query_speaker
from tests.patrol_support import note_scenes, scene

# Two days of two memories each, noted in order; every memory shares the query's words.
SCENES = [
    scene("Morning: the pottery class made a blue vase", "2026-05-02"),
    scene("Later the pottery class glazed the blue vase", "2026-05-02"),
    scene("The pottery class fired a green bowl", "2026-05-03"),
    scene("After that the pottery class fired a green jug", "2026-05-03"),
]


def test_a_memory_that_opens_its_day_gains_the_opening_weight(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", SCENES)
    engram.patrol("Aria")
    engram.views.ensure()
    question = "What did the pottery class make?"

    def scores() -> dict[str, float]:
        found = engram.reading.query("Aria", question, k=4, reactivate=False)
        return {n.action: n.score or 0.0 for n in found.nodes}

    assert PROFILES["default"].opening == 0.2
    weighted = scores()
    explained = engram.reading.query("Aria", question, k=4, reactivate=False, explain=True)
    monkeypatch.setitem(PROFILES, "default", dataclasses.replace(PROFILES["default"], opening=0.0))
    plain = scores()
    monkeypatch.undo()
    assert len(plain) == 4
    openers = {a for a in plain if a.startswith(("Morning", "The pottery"))}
    assert len(openers) == 2
    for action, value in plain.items():  # the first memory of each day gains 0.2, the others nothing
        assert weighted[action] == pytest.approx(value + (0.2 if action in openers else 0.0), abs=1e-6)
    parts = explained.parts  # type: ignore[attr-defined]
    by_action = {n.action: parts[n.id] for n in explained.nodes}
    assert {a for a, p in by_action.items() if "opening" in p} == openers


ingested = test_query_speaker.ingested
"""The LoCoMo-shaped sample ingested once with the hashing embedder (the speaker tests' fixture)."""


def test_the_feedback_harness_reads_what_query_searched(ingested: tuple[Path, Path]) -> None:
    path, data = ingested
    conversations = tuning.load(path)
    engram = tuning.open_data(data, Settings(embedder="hashing"))
    try:
        cases = tuning.read_cases(engram, conversations)
        memories = fb.read_memories(engram, conversations)
    finally:
        engram.close()
    p = PROFILES["default"]
    for case in cases:
        m = memories[case.conversation]
        assert len(m.ids) == 5  # the conversation's five turns, each with its vector
        # the exact search over the memory vectors finds what the vector index found, in order
        found = m.search(case.vector, len(case.semantic))
        assert [i for i, _ in found] == [i for i, _ in case.semantic]
        assert np.allclose([s for _, s in found], [s for _, s in case.semantic], atol=1e-4)
        # no feedback weight: the second search is the first
        again = fb.feedback_semantic(p, case, m, 2, 0.0, False)
        assert [i for i, _ in again] == [i for i, _ in found]
        assert [s for _, s in again] == pytest.approx([s for _, s in found])
    base = tuning.ranker(p)
    same = fb.paired_difference(cases, base, base, rounds=50)
    assert same == {"5": [0.0, 0.0, 0.0], "10": [0.0, 0.0, 0.0]}


def test_the_bench_command_with_feedback(
    ingested: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, data = ingested
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    out = tmp_path / "locomo-logic.json"
    misses = tmp_path / "misses.jsonl"
    args = ["bench", "locomo-logic", "--", str(path), "--reuse-data", str(data), "--feedback"]
    args += ["--misses", str(misses), "--json-out", str(out)]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text(encoding="utf-8"))
    variants = report["variants"]
    assert "default before the opening weight" in variants
    for family in ("dense feedback", "lexical feedback", "first of a day", "opening weight (rank)"):
        assert f"{family}, leave one conversation out" in variants
    assert any(name.startswith("default + dense feedback top 5 w 0.3") for name in variants)
    assert all(set(g) == {"5", "10"} for g in report["paired_gains"].values())
    assert misses.exists()  # every multi-hop question here is found, so the file may be empty
