"""Rebuilding every projection calls no embedding and no LLM API: vectors come from the log.

A counting embedder and a counting LLM (fakes of the ports in `services/ports.py`) are injected at
bootstrap; a patrol embeds nodes and asks the LLM through them, then every view is rebuilt through
`Views.rebuild` and through `engram projections rebuild --all`, with both counters reset to zero.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from engram.adapters.embedders.hashing import HashingEmbedder
from engram.domain.embedding import Embedding
from engram.projections.vectors import centroids_alias, nodes_alias
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.patrol.prompts import (
    ClassifyRoot,
    ConsolidateCluster,
    NameCluster,
    SplitCluster,
    WriteDiary,
)
from engram.services.ports import LLMAnswer, LLMMalformedAnswer, ModelClass
from tests.support import SeededIds, SteppingClock

T = TypeVar("T", bound=BaseModel)


class CountingEmbedder:
    """The hashing embedder behind a counter of calls and texts."""

    def __init__(self, dim: int = 64) -> None:
        self.inner = HashingEmbedder(dim)
        self.calls = 0
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)

    def reset(self) -> None:
        self.calls = self.texts = 0


CANNED: dict[type[BaseModel], dict[str, Any]] = {
    ClassifyRoot: {"root": "Business"},
    NameCluster: {"name": "garden days"},
    ConsolidateCluster: {"merges": [], "make_dead": []},
    SplitCluster: {"groups": []},
    WriteDiary: {
        "diary": "I worked in the garden.\nI read by the fire.\nI slept well.",
        "think_md": ["water the tomatoes", "finish the book", "call Mina"],
    },
}


class CountingLLM:
    """An available LLM that answers every known task with a fixed, valid plan, and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.tasks: list[str] = []

    @property
    def available(self) -> bool:
        return True

    def describe(self) -> str:
        return "fake:counting"

    def model_for(self, model_class: ModelClass) -> str:
        return f"counting-{model_class}"

    def complete(
        self, *, task: str, system: str, prompt: str, schema: type[T], model_class: ModelClass
    ) -> LLMAnswer:
        self.calls += 1
        self.tasks.append(task)
        if schema not in CANNED:
            raise LLMMalformedAnswer(f"no canned answer for {task}", raw="")
        raw = json.dumps(CANNED[schema])
        return LLMAnswer(model=self.model_for(model_class), raw=raw, parsed=schema.model_validate_json(raw))

    def reset(self) -> None:
        self.calls = 0
        self.tasks = []


GROUPS = {
    "garden": ["planted tomatoes in the garden", "watered the tomatoes in the garden", "tomatoes garden"],
    "book": ["read the old book by the fire", "finished reading the old book", "old book by the fire again"],
    "chess": ["played chess with Mina at the club", "lost a chess game to Mina", "chess club with Mina"],
}
LONERS = ["bought a new umbrella", "the train was late", "fixed the bicycle chain"]


def _scene(action: str, importance: float, day: int) -> str:
    return json.dumps(
        {"action": action, "actors": ["me"], "when": [f"2026-03-{day:02d}"], "importance": importance}
    )


def _populate(e: Engram) -> UUID:
    """Two patrols of one being over notes that form sub-clusters; low-importance ones decay."""
    being_id = UUID(e.beings.register("Aria").being_id)
    e.beings.define_soul("Aria", "a patient gardener who reads")
    day = 1
    for texts in GROUPS.values():
        for text in texts:
            e.notes.take("Aria", NoteInput(text=_scene(text, 0.6, day)))
            day += 1
    for text in LONERS:
        e.notes.take("Aria", NoteInput(text=_scene(text, 0.02, day)))
        day += 1
    e.patrol("Aria")
    for i, text in enumerate(["planted beans in the garden", "read a new book by the fire"]):
        e.notes.take("Aria", NoteInput(text=_scene(text, 0.6, 20 + i)))
    e.notes.take("Aria", NoteInput(kind="todo", text="water the garden"))
    e.patrol("Aria")
    e.sleep.dream("Aria")  # dreaming links alike memories (ADR 0062)
    return being_id


def _queries(e: Engram, being_id: UUID, probes: list[np.ndarray[Any, Any]], model: str) -> dict[str, Any]:
    """What readers get from every view: vector searches (ids and scores) and the SQL read models."""
    e.views.ensure()
    vectors, read = e.views.vectors, e.views.read
    out: dict[str, Any] = {"similar_nodes": [], "top3": [], "similar_clusters": [], "centroids": {}}
    out["links"] = [(r["id"], round(r["score"], 5)) for r in e.views.links.all_links(being_id, limit=1000)]
    for probe in probes:
        every = vectors.similar_nodes(being_id, model, probe, 1000)
        out["similar_nodes"].append({str(i): round(s, 5) for i, s in every})
        out["top3"].append([str(i) for i, _ in vectors.similar_nodes(being_id, model, probe, 3)])
        out["similar_clusters"].append(
            {
                str(i): (round(s, 5), p["count"])
                for i, s, p in vectors.similar_clusters(being_id, model, probe, 50)
            }
        )
    for cluster in read.clusters(being_id):
        centroid = vectors.centroid(being_id, model, UUID(cluster["id"]))
        out["centroids"][cluster["id"]] = None if centroid is None else np.round(centroid, 5).tolist()
    out["nodes"] = sorted(read.nodes(being_id), key=lambda r: r["id"])
    out["clusters"] = sorted(read.clusters(being_id), key=lambda r: r["id"])
    out["notes"] = sorted(read.notes(being_id), key=lambda r: r["id"])
    out["diary"] = read.diary(being_id)
    out["being"] = read.being(being_id)
    return out


def _generations(e: Engram) -> dict[str, int]:
    return {row["name"]: row["generation"] for row in e.views.status()}


def test_rebuild_makes_no_embedder_or_llm_call(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a real embedder or LLM was built")

    # Nothing may build a real embedder or LLM behind the fakes' back.
    monkeypatch.setattr("engram.adapters.embedders.build_embedder", refuse)
    monkeypatch.setattr("engram.adapters.llm.build_llm", refuse)
    settings = make_settings()
    embedder, llm = CountingEmbedder(), CountingLLM()

    def open_engram() -> Engram:
        return bootstrap(settings, clock=SteppingClock(), ids=SeededIds(), embedder=embedder, llm=llm)

    e = open_engram()
    try:
        being_id = _populate(e)
        model = embedder.model_id
        assert embedder.calls >= 2 and embedder.texts >= 11, "the patrols embed through the fake"
        assert llm.calls > 0 and "consolidate_cluster" in llm.tasks, "the patrols ask the fake LLM"
        probes = [np.asarray(v.floats(), dtype=np.float32) for v in embedder.inner.embed(["garden", "book"])]
        before = _queries(e, being_id, probes, model)
        assert len(before["nodes"]) >= 11 and any(not c["is_root"] for c in before["clusters"])
        assert before["top3"][0] and any(c is not None for c in before["centroids"].values())
        assert before["links"], "dreaming linked alike memories"
        generations = _generations(e)

        embedder.reset()
        llm.reset()
        for name in e.views.names():
            e.views.rebuild(name)
        assert (embedder.calls, llm.calls) == (0, 0)
        assert _generations(e) == {n: g + 1 for n, g in generations.items()}
        assert e.views.vector_index.resolve_alias(nodes_alias(model)).endswith(
            f"__g{generations['vectors'] + 1}"
        )
        assert _queries(e, being_id, probes, model) == before
    finally:
        e.close()

    # The CLI path, with the same fakes injected where the CLI bootstraps.
    from engram.adapters.cli import main as cli_main

    monkeypatch.setattr(cli_main, "bootstrap", lambda *_, **__: open_engram())
    result = CliRunner().invoke(cli_main.cli, ["projections", "rebuild", "--all", "--json"])
    assert result.exit_code == 0, result.output
    rebuilt = {r["projection"]: r["generation"] for r in json.loads(result.stdout)}
    assert rebuilt == {n: g + 2 for n, g in generations.items()}
    assert (embedder.calls, llm.calls) == (0, 0)

    e = open_engram()
    try:
        assert e.views.vector_index.resolve_alias(centroids_alias(model)).endswith(
            f"__g{generations['vectors'] + 2}"
        )
        assert _queries(e, being_id, probes, model) == before
        assert (embedder.calls, llm.calls) == (0, 0)
    finally:
        e.close()
