"""`engram bench locomo` on a tiny synthetic file in LoCoMo's format (written here; no LoCoMo data).

The questions use words that occur in one or two turns only, so the lexical profile's rankings — and
with them every figure — can be worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.locomo import load, normalise_evidence, parse_date
from bench.metrics import percentile, score, summarise
from bench.run_locomo import LocomoOptions, LocomoRun, run
from engram.adapters.cli.main import cli
from engram.domain.errors import InvalidInput
from engram.services.config import Settings


def turn(speaker: str, dia_id: str | None, text: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"speaker": speaker, "text": text, **extra}
    if dia_id is not None:
        out["dia_id"] = dia_id
    return out


def qa(question: str, evidence: Any, category: Any) -> dict[str, Any]:
    return {"question": question, "answer": "-", "evidence": evidence, "category": category}


SYNTHETIC: list[dict[str, Any]] = [
    {
        "sample_id": "syn-a",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("Ada", "D1:1", "I adopted a greyhound named Comet last spring."),
                turn("Ben", "D1:2", "My zebra finch sings every morning."),
                turn("Ada", "D1:3", "The orchestra rehearsal ran late again."),
            ],
            "session_2_date_time": "10:14 am on 12 June, 2023",
            "session_2": [
                turn(
                    "Ben",
                    "D2:1",
                    "We sailed a catamaran around the lagoon.",
                    img_url=["https://example.invalid/x.jpg"],
                    blip_caption="a photo of a catamaran on turquoise water",
                ),
                turn("Ada", "D2:2", "Comet learned to fetch a frisbee at the lagoon."),
            ],
            "session_3_date_time": "9:00 am on 1 July, 2023",  # a date without turns, as in the real files
        },
        "qa": [
            qa("What does the zebra finch do?", ["D1:2"], 4),
            qa("What did the greyhound fetch, a frisbee?", ["D1:1; D2:2"], 1),
            qa("When did they sail the catamaran?", ["D:2:1"], 2),
            qa("Would the orchestra rehearsal be long?", ["D9:9"], 3),
            qa("Why did the orchestra rehearsal run late?", ["D1:3"], 5),
            qa("Where did Comet learn tricks?", ["D2:2", "D2:2", "n/a"], 4),
        ],
    },
    {
        "sample_id": "syn-b",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "May 3rd 2024, 9:00",
            "session_1": [
                turn("Cy", "D1:1", "Planted basil and tomatoes in the greenhouse."),
                turn("Di", "D1:2", "The greenhouse heater broke during the frost."),
            ],
            "session_2_date_time": "sometime in spring",
            "session_2": [
                turn("Cy", "D2:1", "Repaired the heater with a new thermostat."),
                turn("Di", None, "Thanks for fixing it!"),
                turn("Di", "D2:3", ""),
            ],
        },
        "qa": [
            qa("What broke in the greenhouse and how was it repaired?", ["D1:2", "D2:1"], 1),
            qa("When was the thermostat installed?", "D2:1", "2"),
            qa("What colour is the submarine?", ["D1:1"], 4),
            qa("basil", ["D1:1"], 7),
        ],
    },
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("locomo") / "synthetic.json"
    path.write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def result(dataset: Path) -> LocomoRun:
    return run(
        LocomoOptions(path=dataset, profiles=("lexical", "semantic", "default")),
        Settings(embedder="hashing"),
    )


# -- reading the format ----------------------------------------------------------------------------


def test_dates_parse_in_the_formats_seen() -> None:
    assert parse_date("1:56 pm on 8 May, 2023") == "2023-05-08"
    assert parse_date("12:09 am on 13 September, 2023") == "2023-09-13"
    assert parse_date("May 3rd 2024, 9:00") == "2024-05-03"
    assert parse_date("8th of Sept. 2023") == "2023-09-08"
    assert parse_date("2023-05-08T13:56:00") == "2023-05-08"
    assert parse_date("08/05/2023") == "2023-05-08"
    assert parse_date("June 2024") == "2024-06-01"
    assert parse_date("sometime in spring") is None
    assert parse_date("31 February 2023") is None


def test_evidence_is_normalised_and_what_is_dropped_is_counted() -> None:
    known = {"D1:1", "D1:2", "D2:2", "D11:26"}
    kept, raw, counts = normalise_evidence(["D1:1; D2:2", "D:11:26", "D1:1", "D01:2", "D9:9", "x"], known)
    assert kept == ("D1:1", "D2:2", "D11:26", "D1:2")
    assert raw == ("D1:1; D2:2", "D:11:26", "D1:1", "D01:2", "D9:9", "x")
    assert counts.as_dict() == {
        "strings": 6,
        "clean": 2,  # "D1:1", "D9:9" (well-formed, but no such turn)
        "repaired": 3,
        "unparseable": 1,
        "unknown_ids": 1,
        "duplicate_ids": 1,
        "questions_without_evidence": 0,
    }
    assert normalise_evidence("D1:2 D1:1", known)[0] == ("D1:2", "D1:1")
    assert normalise_evidence(None, known)[0] == ()


def test_turns_become_scenes_with_dates_captions_and_refs(dataset: Path) -> None:
    a, b = load(dataset)
    assert [t.dia_id for t in a.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert a.turns[3].action() == (
        "We sailed a catamaran around the lagoon. [shared an image: a photo of a catamaran on turquoise water]"
    )
    assert [t.date for t in a.turns] == ["2023-05-08"] * 3 + ["2023-06-12"] * 2
    # An unreadable session date falls back to the nearest earlier one; a turn without an id gets one.
    assert [(t.dia_id, t.date) for t in b.turns] == [
        ("D1:1", "2024-05-03"),
        ("D1:2", "2024-05-03"),
        ("D2:1", "2024-05-03"),
        ("D2:2", "2024-05-03"),
    ]
    assert (b.undated_sessions, b.skipped_turns) == (1, 1)
    assert [q.category for q in b.questions] == [1, 2, 4, 7]
    assert len(load(dataset, limit=1)) == 1


# -- metric arithmetic -----------------------------------------------------------------------------


def test_metrics_by_hand() -> None:
    s = score(["D1:1", "D2:5"], ["D2:5", "D3:1", None, "D1:1", "D1:9"], ks=(1, 3, 5))
    assert s.recall == {1: 0.5, 3: 0.5, 5: 1.0}
    assert s.hit == {1: 1.0, 3: 1.0, 5: 1.0}
    assert s.session_recall == {1: 0.5, 3: 0.5, 5: 1.0}
    miss = score(["D4:4"], ["D4:1", "D4:2"], ks=(1, 3))
    assert miss.recall == {1: 0.0, 3: 0.0} and miss.hit == {1: 0.0, 3: 0.0}
    assert miss.session_recall == {1: 1.0, 3: 1.0}  # the right session, the wrong turn
    summary = summarise([s, miss], [10.0, 30.0], ks=(1, 3))
    assert summary["recall"] == {"1": 0.25, "3": 0.25}
    assert summary["hit"] == {"1": 0.5, "3": 0.5}
    assert summary["session_recall"] == {"1": 0.75, "3": 0.75}
    assert summary["latency_ms"] == {"p50": 20.0, "p95": 29.0}
    assert percentile([], 50) == 0.0
    with pytest.raises(ValueError, match="without evidence"):
        score([], ["D1:1"])


def test_lexical_figures_on_the_synthetic_file(result: LocomoRun) -> None:
    lexical = result.report["profiles"]["lexical"]
    cats = lexical["categories"]
    # Open-domain's only question lost its evidence (an id of no turn): no category-3 row at all.
    assert set(cats) == {"1", "2", "4", "5", "7"}
    # Multi-hop: two questions, each with its second evidence turn at rank 2.
    assert cats["1"]["questions"] == 2
    assert cats["1"]["recall"] == {"1": 0.5, "3": 1.0, "5": 1.0, "10": 1.0}
    assert cats["1"]["hit"] == {"1": 1.0, "3": 1.0, "5": 1.0, "10": 1.0}
    assert cats["1"]["session_recall"] == {"1": 0.5, "3": 1.0, "5": 1.0, "10": 1.0}
    assert cats["2"]["recall"] == {"1": 1.0, "3": 1.0, "5": 1.0, "10": 1.0}
    # Single-hop: two found at rank 1, one (no word in common) not at all.
    assert cats["4"]["questions"] == 3
    assert cats["4"]["recall"] == {k: pytest.approx(2 / 3, abs=1e-4) for k in ("1", "3", "5", "10")}
    # Overall = categories 1-4 only: 7 questions; R@1 = (0.5 + 0.5 + 1 + 1 + 1 + 1 + 0) / 7.
    overall = lexical["overall"]
    assert overall["questions"] == 7
    assert overall["recall"]["1"] == pytest.approx(5 / 7, abs=1e-4)
    assert overall["recall"]["3"] == pytest.approx(6 / 7, abs=1e-4)
    assert overall["hit"]["1"] == pytest.approx(6 / 7, abs=1e-4)
    assert overall["session_recall"]["1"] == pytest.approx(5 / 7, abs=1e-4)
    # The adversarial question is a perfect hit, reported apart; with it R@1 would be 6/8.
    assert lexical["adversarial"]["questions"] == 1 and lexical["adversarial"]["recall"]["1"] == 1.0
    assert cats["7"]["recall"]["1"] == 1.0
    assert lexical["latency_ms"]["p50"] > 0


def test_per_question_details(result: LocomoRun) -> None:
    by_question = {q["question"]: q for q in result.questions}
    fetch = by_question["What did the greyhound fetch, a frisbee?"]
    assert fetch["evidence"] == ["D1:1", "D2:2"] and fetch["raw_evidence"] == ["D1:1; D2:2"]
    assert fetch["profiles"]["lexical"]["refs"][:2] == ["D2:2", "D1:1"]
    assert by_question["What colour is the submarine?"]["profiles"]["lexical"]["refs"] == []
    unscored = by_question["Would the orchestra rehearsal be long?"]
    assert unscored["evidence"] == [] and "recall" not in unscored["profiles"]["lexical"]
    assert len(result.questions) == 10


def test_report_counts_and_every_profile(result: LocomoRun) -> None:
    ds = result.report["dataset"]
    assert (ds["conversations"], ds["turns"], ds["skipped_turns"], ds["undated_sessions"]) == (2, 9, 1, 1)
    assert ds["sample_ids"] == ["syn-a", "syn-b"]
    assert ds["categories"] == {"1": 2, "2": 2, "3": 1, "4": 3, "5": 1, "7": 1}
    assert ds["evidence"] == {
        "strings": 13,
        "clean": 10,
        "repaired": 2,
        "unparseable": 1,
        "unknown_ids": 1,
        "duplicate_ids": 1,
        "questions_without_evidence": 1,
    }
    assert ds["unscored_questions"] == {"3": 1}
    assert result.report["ingest"]["notes"] == 9 and result.report["ingest"]["nodes"] == 9
    assert result.report["config"]["llm"] == "none" and result.report["config"]["embedder"] == "hashing"
    assert {"cpus", "python"} <= set(result.report["machine"]) and result.report["date"]
    for name in ("lexical", "semantic", "default"):
        p = result.report["profiles"][name]
        assert p["overall"]["questions"] == 7, name
        for group in (*p["categories"].values(), p["overall"]):
            assert all(0.0 <= v <= 1.0 for key in ("recall", "hit") for v in group[key].values())
            assert group["recall"]["1"] <= group["recall"]["3"] <= group["recall"]["10"]


def test_reuse_data_only_queries_again(dataset: Path, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    options = LocomoOptions(path=dataset, profiles=("lexical",), reuse_data=keep)
    first = run(options, Settings(embedder="hashing"))
    again = run(options, Settings(embedder="hashing"))
    assert first.report["ingest"]["reused"] is False and again.report["ingest"]["reused"] is True
    assert again.questions == [
        {**q, "profiles": {"lexical": {**q["profiles"]["lexical"], "ms": a["profiles"]["lexical"]["ms"]}}}
        for q, a in zip(first.questions, again.questions, strict=True)
    ]
    other = LocomoOptions(path=dataset, profiles=("lexical",), reuse_data=keep, limit_conversations=1)
    with pytest.raises(InvalidInput, match="another ingest"):
        run(other, Settings(embedder="hashing"))
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "something").write_text("x")
    with pytest.raises(InvalidInput, match="no finished bench ingest"):
        run(
            LocomoOptions(path=dataset, profiles=("lexical",), reuse_data=stray), Settings(embedder="hashing")
        )


def test_bad_inputs_fail_before_any_work(dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown profile"):
        run(LocomoOptions(path=dataset, profiles=("nope",)), Settings(embedder="hashing"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"', encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a JSON file"):
        run(LocomoOptions(path=bad), Settings(embedder="hashing"))


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_smoke(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "unused"))
    runner = CliRunner()
    details = tmp_path / "details.jsonl"
    args = ["bench", "locomo", str(dataset), "--limit-conversations", "1", "--profile", "lexical"]
    done = runner.invoke(cli, [*args, "--json", "--details", str(details)], catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dataset"]["sample_ids"] == ["syn-a"] and list(report["profiles"]) == ["lexical"]
    assert report["profiles"]["lexical"]["overall"]["questions"] == 4
    assert len(details.read_text(encoding="utf-8").splitlines()) == 6
    text = runner.invoke(cli, args, catch_exceptions=False)
    assert text.exit_code == 0, text.stderr
    assert "overall 1-4" in text.stdout and "5 adversarial" in text.stdout and "evidence:" in text.stdout
    code = runner.invoke(cli, [*args, "--profile", "nope"], catch_exceptions=False).exit_code
    assert code == 2
    assert not (tmp_path / "unused").exists()  # a fresh temporary data dir, never ENGRAM_DATA_DIR
