"""`query` favours the memories of an actor the question names (ADR 0082), on both backends; and the
offline harness of `engram bench locomo-logic` ranks what `query` ranks (ADR 0083)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from click.testing import CliRunner

from bench import locomo_tuning as tuning
from bench.page import locomo_logic
from bench.run_locomo import LocomoOptions, being_name, run
from engram.adapters.cli.main import cli
from engram.services.bootstrap import Engram
from engram.services.config import Settings
from engram.services.ranking import PROFILES
from tests.patrol_support import note_scenes, scene

# Days apart, so no memory is another's neighbour: the weight is the only difference.
SCENES = [
    scene("A blue vase from the pottery class", "2026-05-02", actors=["Lena"]),
    scene("The pottery class made a green bowl, pottery class again", "2026-05-09", actors=["Mina"]),
    scene("The pottery class made a tall jug, pottery class again", "2026-05-16", actors=["Mina"]),
    scene("Fixed the bike chain", "2026-05-23", actors=["Lena"]),
]


def test_a_named_actor_s_memories_gain_the_speaker_weight(
    engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", SCENES)
    engram.patrol("Aria")
    engram.views.ensure()
    ranking = engram.views.read.ranking(being_id)  # the actors column, read on this backend
    assert sorted(sorted(ranking.actors[s]) for s in range(len(ranking))) == [
        ["lena"],
        ["lena"],
        ["mina"],
        ["mina"],
    ]

    def scores(text: str) -> dict[str, float]:
        found = engram.reading.query("Aria", text, k=4, reactivate=False)
        return {n.action: n.score or 0.0 for n in found.nodes}

    assert PROFILES["default"].speaker == 0.8
    question = "What did Lena make at the pottery class?"
    weighted = scores(question)
    monkeypatch.setitem(PROFILES, "default", dataclasses.replace(PROFILES["default"], speaker=0.0))
    plain = scores(question)
    plain_unnamed = scores("What was made at the pottery class?")
    monkeypatch.undo()
    lena = {a for a in plain if "vase" in a or "bike" in a}
    assert len(plain) == 4 and len(lena) == 2
    for action, score in plain.items():  # Lena's two memories gain 0.8, Mina's nothing
        assert weighted[action] == pytest.approx(score + (0.8 if action in lena else 0.0), abs=1e-6)
    # A question naming no actor of the being ranks as without the weight.
    unnamed = "What was made at the pottery class?"
    assert scores(unnamed) == pytest.approx(plain_unnamed)


SAMPLE: list[dict[str, Any]] = [
    {
        "sample_id": f"syn-{c}",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ada", "dia_id": "D1:1", "text": f"I adopted a greyhound named Comet {c}."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "My greyhound sings every morning."},
                {"speaker": "Ada", "dia_id": "D1:3", "text": "The orchestra rehearsal ran late again."},
            ],
            "session_2_date_time": "10:14 am on 12 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "We sailed a catamaran around the lagoon."},
                {"speaker": "Ada", "dia_id": "D2:2", "text": "Comet learned to fetch a frisbee."},
            ],
        },
        "qa": [
            {"question": "What greyhound did Ada adopt?", "answer": "-", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Ben sail?", "answer": "-", "evidence": ["D2:1"], "category": 1},
            {"question": "Why was the rehearsal late?", "answer": "-", "evidence": ["D1:3"], "category": 5},
        ],
    }
    for c in ("a", "b")
]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("logic")
    path = root / "sample.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    data = root / "data"
    run(LocomoOptions(path=path, profiles=("default",), reuse_data=data), Settings(embedder="hashing"))
    return path, data


def test_the_harness_ranks_what_query_ranks(ingested: tuple[Path, Path]) -> None:
    path, data = ingested
    conversations = tuning.load(path)
    engram = tuning.open_data(data, Settings(embedder="hashing"))
    try:
        cases = tuning.read_cases(engram, conversations)
        assert [(c.conversation, c.category) for c in cases] == [
            ("syn-a", 4),
            ("syn-a", 1),
            ("syn-b", 4),
            ("syn-b", 1),
        ]
        assert cases[0].names == {"ada"} and cases[1].names == {"ben"}
        rank_of = tuning.ranker(PROFILES["default"])
        beings = [being_name(c) for c in conversations for _ in (0, 1)]
        for case, being in zip(cases, beings, strict=True):
            found = engram.reading.query(being, case.text, k=5, profile_name="default", reactivate=False)
            assert [n.id for n in found.nodes] == rank_of(case, 5)
    finally:
        engram.close()
    result = tuning.evaluate(cases, tuning.ranker(PROFILES["default"]))
    assert result["overall"].questions == 4 and set(result["conversations"]) == {"syn-a", "syn-b"}
    assert result["overall"].recall10 == 1.0  # two memories each: every evidence turn is in the top 10
    grid = [tuning.variant(PROFILES["default"], speaker=w) for w in (0.0, 0.8)]
    cv = tuning.cross_validate(cases, grid)
    assert set(cv["chosen"]) == {"syn-a", "syn-b"}
    assert cv["held_out"]["overall"].questions == 4


def test_the_bench_command_and_its_page_section(
    ingested: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, data = ingested
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    out = tmp_path / "locomo-logic.json"
    args = ["bench", "locomo-logic", "--", str(path), "--reuse-data", str(data), "--json-out", str(out)]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["benchmark"] == "locomo-logic" and report["dataset"]["questions"] == 4
    variants = report["variants"]
    assert list(variants)[:2] == ["default before #15", "default"]
    assert "speaker weight, leave one conversation out" in variants
    assert not any("links" in name for name in variants)  # only with --links
    default = variants["default"]
    assert set(default["categories"]) == {"1", "2", "3", "4"} and set(default["conversations"]) == {
        "syn-a",
        "syn-b",
    }
    section = locomo_logic(report)
    assert section.startswith("## LoCoMo retrieval logic")
    assert "| **default** |" in section and "syn-a: " in section
