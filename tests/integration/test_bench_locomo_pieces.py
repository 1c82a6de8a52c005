"""`engram bench locomo-pieces`: a memory's text in sentences or N-token pieces, each embedded, the
memory scoring its best piece (docs/recall.md, "Memory side: finer pieces")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bench import page_context
from bench.locomo_context_logic import Dense, with_semantic
from bench.locomo_pieces import Pieces, Split, minilm_count, pieces, scorers, sentences
from bench.locomo_tuning import Case
from engram.adapters.cli.main import cli
from engram.projections.ranking_cache import BeingRanking
from tests.integration.test_bench_locomo_context import ingested

__all__ = ["ingested"]  # the fixture, shared with the contextual-vector tests


def words(text: str) -> int:
    return len(text.split())


OPENER = "Hey Ada! Long time no chat. Last weekend my girlfriend and I went fishing. How about you?"


def test_a_turn_is_cut_into_its_sentences_and_an_image_is_a_piece_of_its_own() -> None:
    assert sentences(OPENER) == [
        "Hey Ada!",
        "Long time no chat.",
        "Last weekend my girlfriend and I went fishing.",
        "How about you?",
    ]
    assert sentences("Look! [shared an image: a red kite]") == ["Look!", "[shared an image: a red kite]"]
    assert pieces("Just one.", Split("sentences", None), words) == ["Just one."]


def test_sentences_are_packed_while_they_fit_and_a_long_one_is_cut_between_words() -> None:
    assert pieces(OPENER, Split("8", 8), words) == [
        "Hey Ada! Long time no chat.",
        "Last weekend my girlfriend and I went fishing.",
        "How about you?",
    ]
    assert pieces("one two three four five", Split("2", 2), words) == ["one two", "three four", "five"]
    assert pieces(OPENER, Split("99", 99), words) == [OPENER]  # it fits: one piece, no extra vector


def test_pieces_are_counted_in_minilms_own_tokens() -> None:
    count = minilm_count()
    assert count("Hey Ada!") == 3 and count("sourdough") == 3  # hey ada ! — sour ##dou ##gh
    assert all(count(p) <= 24 for p in pieces(OPENER * 3, Split("24", 24), count))


def _case() -> Case:
    # with_semantic reads no ranking column: an empty one will do.
    return Case("c", 1, "q", ("D1:1",), [], [], BeingRanking("nodes", 0, []), {"a": "D1:1", "b": "D1:2"})


def test_a_diluted_memory_is_found_by_its_best_piece() -> None:
    # Memory a: its whole vector is far from the question, one of its two pieces is close; memory b
    # (one piece: its whole vector) is in between. Today's cosine ranks b first, the best piece a.
    q = np.array([1.0, 0.0], dtype=np.float32)
    whole = np.array([[0.5, 0.866], [0.7, 0.714]], dtype=np.float32)
    piece_rows = np.array([[0.95, 0.312], [0.0, 1.0], [0.7, 0.714]], dtype=np.float32)
    assert list(Pieces(piece_rows, np.array([0, 2])) @ q) == pytest.approx([0.95, 0.7])
    dense = Dense({"c": ["a", "b"]}, {"c": whole}, {"s": {"c": Pieces(piece_rows, np.array([0, 2]))}}, {})
    case = _case()
    dense.questions[id(case)] = q
    today = with_semantic([case], dense, None, None)[id(case)].semantic
    assert [i for i, _ in today] == ["b", "a"]
    by_scorer = dict(scorers())
    best = with_semantic([case], dense, "s", by_scorer["pieces, max"])[id(case)].semantic
    assert [i for i, _ in best] == ["a", "b"] and best[0][1] == pytest.approx(0.95)
    blended = with_semantic([case], dense, "s", by_scorer["turn + pieces, blend 0.5"])[id(case)].semantic
    assert blended[0][0] == "a" and blended[0][1] == pytest.approx(0.725)


def test_the_command_ranks_every_split_beside_todays_and_the_page_shows_it(
    ingested: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, data = ingested
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    out = tmp_path / "locomo-pieces.json"
    args = ["bench", "locomo-pieces", "--", str(path), "--reuse-data", str(data), "--split", "sentences"]
    args += ["--cache", str(tmp_path / "vectors"), "--json-out", str(out)]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(out.read_text(encoding="utf-8"))
    variants = report["variants"]
    assert report["benchmark"] == "locomo-pieces" and report["dataset"]["questions"] == 4
    # Exact cosines over today's vectors rank as the data dir's own vector search does.
    hnsw = variants["default, HNSW channel (the data dir)"]
    assert variants["default, today's vectors (exact cosines)"]["overall"] == hnsw["overall"]
    assert "default, turn + pieces (sentences), blend 0.5" in variants
    assert "dense, pieces (sentences), max" in variants
    cost = report["cost"]["sentences"]
    assert cost["memories"] > 0 and cost["extra_vectors"] >= 2 * cost["split"]
    assert set(report["paired"]["default, pieces (sentences), max"]) == {"overall", "1", "openers"}
    assert "pieces variant, leave one conversation out" in report["paired"]
    assert set(report["cross_validation"]) == {"syn-a", "syn-b"}
    section = page_context.render({"locomo-pieces": report})
    assert section is not None and section.startswith("## LoCoMo: finer pieces")
    assert "| sentences |" in section


def test_an_unknown_split_is_refused(ingested: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path, data = ingested
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    args = ["bench", "locomo-pieces", "--", str(path), "--reuse-data", str(data), "--split", "paragraphs"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code != 0 and "unknown split(s) ['paragraphs']" in done.output
