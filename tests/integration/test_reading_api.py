"""`engram.open`: the documented example runs as written, and the arguments do what they say."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import engram.services.api as api
from engram.adapters.embedders.hashing import HashingEmbedder
from engram.services.api import open_engram


def test_the_module_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert api.__doc__ is not None
    example = textwrap.dedent(api.__doc__.split("Example::\n", 1)[1].split("\nThe reads are", 1)[0])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGRAM_LLM", "none")
    exec(compile(example, "services/api.py example", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("<memory>") and out[0].endswith("</memory>")
    assert sorted(out[0][len("<memory>") : -len("</memory>")].split(" / ")) == [
        "Planted tomatoes with Mina",
        "hopeful",
    ]
    assert out[1].endswith(" Planted tomatoes with Mina") and float(out[1].split()[0]) > 0
    assert "Curious, warm, dry humour." in out and "- [todo] Renew the passport" in out
    assert "1 None" in out  # search_memory's total and (no further page) cursor
    assert "## Tools you can use" in out and "- calendar: reads and books appointments" in out
    assert "- 2026-05-02 — Planted tomatoes with Mina — (hopeful)" in out
    assert (tmp_path / "engram-data" / "events.sqlite3").exists()


def test_settings_and_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "openai")  # arguments override the environment
    with open_engram(tmp_path / "a", embedder="hashing", llm="none", log_level="error") as engram:
        assert engram.settings.data_dir == tmp_path / "a"
        assert engram.settings.embedder == "hashing" and engram.settings.llm == "none"
        assert engram.settings.log_level == "error"
        assert engram.embedder.model_id == "hashing-384"
    mine = HashingEmbedder(dim=64)
    with open_engram(str(tmp_path / "b"), embedder=mine, llm="none") as engram:
        assert engram.embedder is mine and engram.settings.embedder == "openai"
        engram.beings.register("Aria")
        assert engram.reading.context("Aria").being == "Aria"
    with pytest.raises(ValueError, match="embedder"):
        open_engram(tmp_path / "c", embedder="nonsense")
