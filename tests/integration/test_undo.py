"""`engram undo`: a patrol's consolidation reversed with compensating events (ADR 0072)."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.domain.cluster import Cluster
from engram.domain.entities import EntityMap
from engram.domain.errors import InvalidInput
from engram.domain.ids import entity_map_id
from engram.domain.node import MemoryNode
from engram.domain.undo import Undo, undo_id_for
from engram.projections.notes import utc_text
from engram.services.commands import NoteInput
from engram.services.errors import NotFound
from engram.services.undo import AlreadyUndone, UndoRefused
from tests.patrol_support import (
    Call,
    ScriptedLLM,
    World,
    history_types,
    merge_first_two,
    note_scenes,
    scene,
    topic_scenes,
)

A, B, C = (
    "Walked the dog along the river",
    "Walked the dog, then painted a watercolor of tulips",
    "Walked the dog again by the river at dawn",
)


def _merges(engram: Any, being_id: UUID) -> list[str]:
    """Every consolidation of the being as a decision id (`NODE@VERSION`), oldest first."""
    out: list[tuple[str, str]] = []
    for node in engram.views.read.nodes(being_id):
        for e in engram.audit.history("node", node["id"]):
            if e["type"] == "MemoryNode.AbsorbedNodes":
                out.append((e["timestamp"], f"{node['id']}@{e['version']}"))
    return [d for _, d in sorted(out)]


def _views(engram: Any, being_id: UUID) -> dict[str, Any]:
    """What a reader sees: node rows, cluster counts, full-text hits and vector hits."""
    engram.views.ensure()
    nodes = {n["action"]: n for n in engram.views.read.nodes(being_id)}
    clusters = {c["name"]: c for c in engram.views.read.clusters(being_id)}
    keys = sorted(k for k, _ in engram.views.search.keywords(being_id, ["dog"]))
    vector = np.asarray(engram.embedder.embed([A])[0].floats(), dtype=np.float32)
    hits = engram.views.vectors.similar_nodes(
        being_id, engram.embedder.model_id, vector, 10, statuses=["active"]
    )
    return {"nodes": nodes, "clusters": clusters, "keys": keys, "hits": sorted(str(i) for i, _ in hits)}


def _merged(engram: Any) -> tuple[UUID, str]:
    being_id = UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", [scene(A, "2021-01-03"), scene(B, "2022-02-14")])
    engram.patrol("Aria", llm=ScriptedLLM({"consolidate_cluster": merge_first_two}))
    engram.views.ensure()
    assert len(engram.views.read.nodes(being_id, statuses=["dead"])) == 1
    [decision] = _merges(engram, being_id)
    return being_id, decision


def test_undo_of_a_consolidation_brings_the_absorbed_node_back(engram) -> None:
    being_id, decision = _merged(engram)
    survivor_id, version = UUID(decision.split("@")[0]), int(decision.split("@")[1])
    survivor_before = engram.store.get(MemoryNode, survivor_id, version=version - 1)
    active_before = sum(c["active_count"] for c in engram.views.read.clusters(being_id))

    result = engram.undo.undo(decision, reason="the model merged two different walks")

    assert result.applied and [s.decision for s in result.plan.steps] == [decision]
    after = _views(engram, being_id)
    assert {a: n["status"] for a, n in after["nodes"].items()} == {A: "active", B: "active"}
    assert all(n["absorbed_into"] is None for n in after["nodes"].values())
    # The survivor's `when` and importance are as before the merge; the full text and vectors follow.
    survivor_row = next(n for n in after["nodes"].values() if n["id"] == str(survivor_id))
    assert survivor_row["scene"]["when"] == survivor_before.scene["when"]
    assert survivor_row["importance"] == survivor_before.importance
    assert engram.store.get(MemoryNode, survivor_id).scene["when"] == survivor_before.scene["when"]
    assert len(after["keys"]) == 2 and len(after["hits"]) == 2
    assert sum(c["active_count"] for c in after["clusters"].values()) == active_before + 1
    # Nothing deleted: the merge is still in the log, followed by its undo, which says why.
    assert history_types(engram, "node", survivor_id)[-2:] == [
        "MemoryNode.AbsorbedNodes",
        "MemoryNode.AbsorptionUndone",
    ]
    undo = engram.store.get(Undo, undo_id_for(being_id, decision))
    assert (undo.decision, undo.kind, undo.reason) == (
        decision,
        "consolidation",
        "the model merged two different walks",
    )

    # A rebuild reads the same log and gives the same views.
    engram.views.rebuild_all()
    assert _views(engram, being_id) == after


def test_undo_of_an_undone_decision_is_refused(engram) -> None:
    _, decision = _merged(engram)
    engram.undo.undo(decision, reason="wrong merge")
    with pytest.raises(AlreadyUndone, match="already undone"):
        engram.undo.undo(decision, reason="again")


def test_dry_run_prints_the_plan_and_writes_nothing(engram) -> None:
    being_id, decision = _merged(engram)
    head = engram.store.head()
    result = engram.undo.undo(decision, reason="checking", dry_run=True)
    assert not result.applied and [s.decision for s in result.plan.steps] == [decision]
    assert engram.store.head() == head
    assert engram.store.find(Undo, undo_id_for(being_id, decision)) is None


def _merged_twice(engram: Any) -> tuple[UUID, str, str]:
    """A first merge, then a second patrol that merges the survivor with a new node."""
    being_id, first = _merged(engram)
    note_scenes(engram, "Aria", [scene(C, "2023-03-25")])
    engram.patrol("Aria", llm=ScriptedLLM({"consolidate_cluster": merge_first_two}))
    engram.views.ensure()
    merges = _merges(engram, being_id)
    assert len(merges) == 2 and merges[0] == first
    return being_id, first, merges[1]


def test_a_decision_later_decisions_depend_on_is_refused_with_them_named(engram) -> None:
    _, first, second = _merged_twice(engram)
    head = engram.store.head()
    with pytest.raises(UndoRefused, match=second):
        engram.undo.undo(first, reason="wrong merge")
    assert engram.store.head() == head


def test_cascade_undoes_the_dependents_first(engram) -> None:
    being_id, first, second = _merged_twice(engram)
    plan = engram.undo.undo(first, reason="wrong merges", cascade=True, dry_run=True).plan
    assert [s.decision for s in plan.steps] == [second, first]

    engram.undo.undo(first, reason="wrong merges", cascade=True)

    after = _views(engram, being_id)
    assert {a: n["status"] for a, n in after["nodes"].items()} == {A: "active", B: "active", C: "active"}
    assert engram.store.get(Undo, undo_id_for(being_id, second)).cascade_of == first
    engram.views.rebuild_all()
    assert _views(engram, being_id) == after


def test_an_absorbed_node_revived_since_cannot_be_undone(engram) -> None:
    being_id, decision = _merged(engram)
    [dead] = engram.views.read.nodes(being_id, statuses=["dead"])
    node = engram.store.get(MemoryNode, UUID(dead["id"]))
    node.trigger_event(
        MemoryNode.Revived, being_id=being_id, timestamp=engram.clock.now(), cycle=1, restarts_clock=True
    )
    engram.store.save(node)
    with pytest.raises(UndoRefused, match="Revived"):
        engram.undo.undo(decision, reason="too late", cascade=True)


@pytest.mark.parametrize(
    ("decision", "error", "match"),
    [
        ("nonsense", InvalidInput, "not a decision id"),
        ("00000000-0000-0000-0000-000000000001@2", NotFound, "not found"),
    ],
)
def test_bad_decision_ids_are_refused(engram, decision: str, error: type[Exception], match: str) -> None:
    engram.beings.register("Aria")
    with pytest.raises(error, match=match):
        engram.undo.undo(decision, reason="x")


def test_an_event_that_is_no_decision_is_refused(engram) -> None:
    _, decision = _merged(engram)
    survivor = decision.split("@")[0]
    with pytest.raises(InvalidInput, match="not a decision undo can reverse"):
        engram.undo.undo(f"{survivor}@1", reason="x")


def _cli(engram: Any, monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(engram.settings.data_dir))
    if engram.settings.database_url is not None:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", engram.settings.database_url.get_secret_value())
    monkeypatch.setenv("ENGRAM_EMBEDDER", engram.settings.embedder)
    monkeypatch.setenv("ENGRAM_LLM", "none")
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_cli_plans_asks_for_yes_and_undoes(engram, monkeypatch: pytest.MonkeyPatch) -> None:
    being_id, decision = _merged(engram)
    survivor = decision.split("@")[0]

    dry = _cli(engram, monkeypatch, "undo", decision, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == f"plan (dry run, nothing written) for {decision}:"
    assert f"1. undo consolidation {decision}: node {survivor} gives back " in dry.stdout
    refused = _cli(engram, monkeypatch, "undo", decision)  # no terminal and no --yes: nothing done
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert engram.store.find(Undo, undo_id_for(being_id, decision)) is None

    done = _cli(engram, monkeypatch, "undo", decision, "--yes", "--reason", "two walks", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["applied"] is True
    assert engram.store.get(Undo, undo_id_for(being_id, decision)).reason == "two walks"
    again = _cli(engram, monkeypatch, "undo", decision, "--yes")
    assert again.exit_code == 4 and "already undone" in again.stderr
    # The log shows the undo and its compensating events.
    logged = _cli(engram, monkeypatch, "log", "--being", "Aria", "--limit", "1000")
    assert logged.exit_code == 0, logged.stderr
    assert [line.split()[2] for line in logged.stdout.splitlines()][-3:] == [
        "Undo.Recorded",
        "MemoryNode.AbsorptionUndone",
        "MemoryNode.Unabsorbed",
    ]


def test_a_decision_of_another_being_is_not_found(engram) -> None:
    _, decision = _merged(engram)
    engram.beings.register("Bo")
    with pytest.raises(NotFound, match="not found"):
        engram.undo.undo(decision, reason="x", being="Bo")
    assert engram.undo.plan(decision, being="Aria").steps[0].decision == decision


# -- a note's supersede (ADR 0048) ------------------------------------------------------------------


def _live_notes(engram: Any, being_id: UUID) -> list[str]:
    engram.views.ensure()
    return sorted(
        n["text"] for n in engram.views.read.notes(being_id, active_at=utc_text(engram.clock.now()))
    )


def _pack(engram: Any) -> list[str]:
    return sorted(n.text for n in engram.packing.pack("Aria", limit=10).notes)


def test_undo_of_a_supersede_brings_the_old_note_back(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    old, new = (
        engram.notes.take("Aria", NoteInput(text=t, kind="preference")).note_id
        for t in ("Water the tomatoes daily", "Water the tomatoes every other day")
    )
    both = _live_notes(engram, being_id)
    engram.note_lifecycle.supersede("Aria", old, new)
    assert _live_notes(engram, being_id) == ["Water the tomatoes every other day"]
    [version] = [e["version"] for e in engram.audit.history("note", old) if e["type"] == "Note.Superseded"]
    decision = f"{old}@{version}"

    plan = engram.undo.undo(decision, reason="the old rule holds", dry_run=True).plan
    assert [s.describe() for s in plan.steps] == [
        f"undo supersede {decision}: note {old} is live again (was superseded by {new})"
    ]
    engram.undo.undo(decision, reason="the old rule holds")

    assert _live_notes(engram, being_id) == both and len(both) == 2
    assert _pack(engram) == both
    assert engram.note_lifecycle.history("Aria", old).replaced_by == []
    with pytest.raises(AlreadyUndone, match="already undone"):
        engram.undo.undo(decision, reason="again")
    engram.views.rebuild_all()
    assert _live_notes(engram, being_id) == both and _pack(engram) == both
    # The note can be superseded again, and that supersede is a decision of its own.
    engram.note_lifecycle.supersede("Aria", old, new)
    assert _live_notes(engram, being_id) == ["Water the tomatoes every other day"]


def test_a_merge_s_supersede_is_not_undone_alone(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    ids = [
        engram.notes.take("Aria", NoteInput(text=t, kind="preference")).note_id
        for t in ("Tea, not coffee", "Green tea")
    ]
    engram.note_lifecycle.merge("Aria", ids, use_llm=False)
    [version] = [e["version"] for e in engram.audit.history("note", ids[0]) if e["type"] == "Note.Superseded"]
    head = engram.store.head()
    with pytest.raises(InvalidInput, match="supersede by a merge"):
        engram.undo.undo(f"{ids[0]}@{version}", reason="x")
    assert engram.store.head() == head and len(_live_notes(engram, being_id)) == 1


# -- an entity alias merge (ADR 0056) ---------------------------------------------------------------


def _aliases(engram: Any, being_id: UUID) -> dict[str, str]:
    engram.views.ensure()
    return engram.views.facts.aliases([str(being_id)])


def test_undo_of_an_alias_merge_unmerges_it(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    engram.facts.merge_entities("Aria", "person:bob", "person:robert")
    assert _aliases(engram, being_id) == {"person:bob": "person:robert"}
    map_id = entity_map_id(being_id)
    [merged] = [e for e in engram.store.events(map_id) if isinstance(e, EntityMap.Merged)]
    decision = f"{map_id}@{merged.originator_version}"

    plan = engram.undo.undo(decision, reason="two Bobs", dry_run=True).plan
    assert [s.describe() for s in plan.steps] == [
        f"undo alias-merge {decision}: entity person:bob no longer reads as person:robert"
    ]
    engram.undo.undo(decision, reason="two Bobs")
    assert _aliases(engram, being_id) == {}
    with pytest.raises(AlreadyUndone):
        engram.undo.undo(decision, reason="again")
    engram.views.rebuild_all()
    assert _aliases(engram, being_id) == {}


def test_an_alias_merge_unmerged_by_hand_since_is_refused(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    engram.facts.merge_entities("Aria", "person:bob", "person:robert")
    engram.facts.unmerge_entities("Aria", "person:bob")
    engram.facts.merge_entities("Aria", "person:bob", "person:bobby")
    map_id = entity_map_id(being_id)
    first = next(e for e in engram.store.events(map_id) if isinstance(e, EntityMap.Merged))
    with pytest.raises(UndoRefused, match="no longer in force"):
        engram.undo.undo(f"{map_id}@{first.originator_version}", reason="x")
    assert _aliases(engram, being_id) == {"person:bob": "person:bobby"}


def test_why_shows_the_undo_of_a_decision_on_its_memory(engram) -> None:
    from engram.services.lineage import why_text

    being_id, decision = _merged(engram)
    survivor_id = decision.split("@")[0]
    engram.undo.undo(decision, reason="two different walks")
    report = engram.why.why(str(being_id), "node", survivor_id)
    undone = [d for d in report["tree"]["decisions"] if d.get("source") == "undo"]
    assert [(d["decision"], d["reason"], d["kind"]) for d in undone] == [
        (decision, "two different walks", "consolidation")
    ]
    assert isinstance(undone[0]["position"], int)
    assert f"* undone @{undone[0]['position']}" in why_text(report)


# -- a cluster merge (spec ❼) and split (spec ❻), ADR 0078 ----------------------------------------


def _cluster_decision(engram: Any, cluster_id: UUID, event_type: str) -> str:
    [version] = [
        e["version"] for e in engram.audit.history("cluster", str(cluster_id)) if e["type"] == event_type
    ]
    return f"{cluster_id}@{version}"


def _membership(engram: Any, being_id: UUID) -> dict[str, Any]:
    """Each cluster's name, counts and nodes as the views have them, and each node's cluster."""
    engram.views.ensure()
    clusters = {
        c["id"]: (c["name"], c["active_count"], c["total_count"])
        for c in engram.views.read.clusters(being_id)
    }
    nodes = {n["id"]: n["cluster_id"] for n in engram.views.read.nodes(being_id)}
    return {"clusters": clusters, "nodes": nodes}


def _centroids(engram: Any, being_id: UUID, cluster_ids: list[UUID]) -> set[UUID]:
    engram.views.ensure()
    return set(engram.views.vectors.centroids(being_id, engram.embedder.model_id, cluster_ids))


def _small_merged(engram: Any) -> tuple[World, Any, Any, list[UUID], str]:
    """`small` (one active node, one dead) merged by ❼ into its most similar sibling `nearer`."""
    w = World(engram)
    small = w.cluster("Small", w.roots["Private"])
    nearer = w.cluster("Nearer", w.roots["Private"])
    moved = w.nodes(small, 1, 0.0, dead=1)
    w.nodes(nearer, 3, w.angle_for(w.threshold + 0.1))
    w.patrol_small_clusters()
    return w, small, nearer, moved, _cluster_decision(engram, small.id, "Cluster.Deleted")


def test_undo_of_a_cluster_merge_brings_the_cluster_and_its_nodes_back(engram) -> None:
    w, small, nearer, moved, decision = _small_merged(engram)
    assert w.cluster_row(small) is None and {w.cluster_of(n) for n in moved} == {nearer.id}
    head = engram.store.head()

    result = engram.undo.undo(decision, reason="the small topic was its own")

    assert result.applied and [(s.decision, s.kind) for s in result.plan.steps] == [
        (decision, "cluster-merge")
    ]
    assert [w.cluster_of(n) for n in moved] == [small.id, small.id]
    row = w.cluster_row(small)
    assert row is not None and (row["name"], row["active_count"], row["total_count"]) == ("Small", 1, 2)
    nearer_row = w.cluster_row(nearer)
    assert nearer_row is not None and (nearer_row["active_count"], nearer_row["total_count"]) == (3, 3)
    assert _centroids(engram, w.being_id, [small.id, nearer.id]) == {small.id, nearer.id}
    assert not engram.store.get(Cluster, small.id).deleted
    # Compensating events after the merge, naming the undo, which says why.
    assert history_types(engram, "cluster", small.id)[-2:] == ["Cluster.Deleted", "Cluster.MergeUndone"]
    assert history_types(engram, "node", moved[0])[-2:] == [
        "MemoryNode.MovedToCluster",
        "MemoryNode.MovedByUndo",
    ]
    undo = engram.store.get(Undo, undo_id_for(w.being_id, decision))
    assert (undo.kind, undo.reason) == ("cluster-merge", "the small topic was its own")
    assert engram.store.get_many(MemoryNode, moved)[0].cluster_id == small.id
    assert engram.store.head() > head
    # `why cluster` shows the undo of its merge.
    report = engram.why.why(str(w.being_id), "cluster", str(small.id))
    assert [(d["decision"], d["kind"]) for d in report["tree"]["decisions"] if d.get("source") == "undo"] == [
        (decision, "cluster-merge")
    ]
    # A rebuild reads the same log and gives the same views.
    after = _membership(engram, w.being_id)
    engram.views.rebuild_all()
    assert _membership(engram, w.being_id) == after
    assert _centroids(engram, w.being_id, [small.id, nearer.id]) == {small.id, nearer.id}

    with pytest.raises(AlreadyUndone, match="already undone"):
        engram.undo.undo(decision, reason="again")


def _split(engram: Any, *, extra: int = 0) -> tuple[World, Any, UUID, list[str], str]:
    """`Big` (13 active nodes) split by ❻: its first 4 shown nodes become `Split part`."""
    w = World(engram)
    big = w.cluster("Big", w.roots["Private"])
    w.nodes(big, 13 + extra, 0.0)
    taken: list[str] = []

    def split(call: Call) -> dict[str, Any]:
        taken.extend(call.ids[:4])
        return {"groups": [{"name": "Split part", "node_ids": call.ids[:4]}]}

    engram.patrol("Aria", llm=ScriptedLLM({"split_cluster": split}))
    engram.views.ensure()
    [part] = [UUID(c["id"]) for c in engram.views.read.clusters(w.being_id) if c["name"] == "Split part"]
    return w, big, part, taken, f"{part}@1"


def test_undo_of_a_split_folds_the_new_cluster_back_with_the_nodes_that_joined_it(engram) -> None:
    w, big, part, taken, decision = _split(engram)
    assert {str(w.cluster_of(UUID(n))) for n in taken} == {str(part)}
    [joiner] = w.nodes(engram.store.get(Cluster, part), 1, 0.0)  # made in the new cluster since

    plan = engram.undo.plan(decision)
    assert [s.kind for s in plan.steps] == ["cluster-split"] and list(plan.steps[0].joined) == [joiner]
    assert "folded back into" in plan.steps[0].describe() and "joined it since" in plan.steps[0].describe()
    engram.undo.undo(decision, reason="one topic, not two")

    assert w.cluster_row(engram.store.get(Cluster, part)) is None and engram.store.get(Cluster, part).deleted
    assert {w.cluster_of(UUID(n)) for n in taken} | {w.cluster_of(joiner)} == {big.id}
    row = w.cluster_row(big)
    assert row is not None and (row["active_count"], row["total_count"]) == (14, 14)
    assert history_types(engram, "cluster", part)[-1] == "Cluster.SplitUndone"
    undo = engram.store.get(Undo, undo_id_for(w.being_id, decision))
    assert undo.kind == "cluster-split" and str(joiner) in undo.affected
    after = _membership(engram, w.being_id)
    engram.views.rebuild_all()
    assert _membership(engram, w.being_id) == after
    with pytest.raises(AlreadyUndone, match="already undone"):
        engram.undo.undo(decision, reason="again")


def test_a_merge_a_later_split_depends_on_is_refused_then_undone_by_cascade(engram) -> None:
    w = World(engram)
    small = w.cluster("Small", w.roots["Private"])
    nearer = w.cluster("Nearer", w.roots["Private"])
    [moved] = w.nodes(small, 1, 0.0)
    w.nodes(nearer, 10, w.angle_for(w.threshold + 0.1))
    w.patrol_small_clusters()
    merge = _cluster_decision(engram, small.id, "Cluster.Deleted")

    def split(call: Call) -> dict[str, Any]:  # the moved node and two others split off `Nearer`
        others = [i for i in call.ids if i != str(moved)][:2]
        return {"groups": [{"name": "Split part", "node_ids": [str(moved), *others]}]}

    engram.patrol("Aria", llm=ScriptedLLM({"split_cluster": split}))
    engram.views.ensure()
    [part] = [UUID(c["id"]) for c in engram.views.read.clusters(w.being_id) if c["name"] == "Split part"]
    assert w.cluster_of(moved) == part
    head = engram.store.head()

    with pytest.raises(UndoRefused, match=f"depend on it: {part}@1"):
        engram.undo.undo(merge, reason="x")
    dry = engram.undo.undo(merge, reason="x", cascade=True, dry_run=True)
    assert [(s.decision, s.kind) for s in dry.plan.steps] == [
        (f"{part}@1", "cluster-split"),
        (merge, "cluster-merge"),
    ]
    assert engram.store.head() == head

    engram.undo.undo(merge, reason="wrong merge", cascade=True)
    assert w.cluster_of(moved) == small.id and engram.store.get(Cluster, part).deleted
    membership = _membership(engram, w.being_id)
    assert membership["clusters"][str(small.id)] == ("Small", 1, 1)
    assert membership["clusters"][str(nearer.id)][1:] == (10, 10)
    assert engram.store.get(Undo, undo_id_for(w.being_id, f"{part}@1")).cascade_of == merge


def test_a_node_moved_by_hand_since_blocks_the_undo_of_a_merge(engram) -> None:
    w, small, _, moved, decision = _small_merged(engram)
    elsewhere = w.cluster("Elsewhere", w.roots["Private"])
    node = engram.store.get(MemoryNode, moved[0])
    node.move_to(elsewhere, engram.clock.now())
    engram.store.save(node)
    head = engram.store.head()
    with pytest.raises(UndoRefused, match=f"node {moved[0]} was moved by hand since the merge"):
        engram.undo.undo(decision, reason="x", cascade=True)
    assert engram.store.head() == head and engram.store.get(Cluster, small.id).deleted


def test_a_sub_cluster_birth_is_no_decision_undo_reverses(engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    note_scenes(engram, "Aria", topic_scenes("climbing", 3))
    engram.patrol("Aria")
    engram.views.ensure()
    [born] = [c["id"] for c in engram.views.read.clusters(being_id) if not c["is_root"]]
    with pytest.raises(InvalidInput, match="birth of sub-cluster"):
        engram.undo.undo(f"{born}@1", reason="x")
    [root] = [c["id"] for c in engram.views.read.clusters(being_id) if c["name"] == "Private"]
    with pytest.raises(InvalidInput, match="without splitting another"):
        engram.undo.undo(f"{root}@1", reason="x")


def test_the_cli_undoes_a_cluster_merge(engram, monkeypatch: pytest.MonkeyPatch) -> None:
    w, small, _, moved, decision = _small_merged(engram)
    dry = _cli(engram, monkeypatch, "undo", decision, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert (
        f"1. undo cluster-merge {decision}: cluster {small.id} is alive again and takes back 2 nodes"
        in dry.stdout
    )
    done = _cli(engram, monkeypatch, "undo", decision, "--yes", "--reason", "its own topic")
    assert done.exit_code == 0, done.stderr
    assert [w.cluster_of(n) for n in moved] == [small.id, small.id]
    history = _cli(engram, monkeypatch, "history", "cluster", str(small.id))
    assert history.exit_code == 0, history.stderr
    assert "Cluster.MergeUndone" in history.stdout


def test_a_node_that_died_since_blocks_the_undo_of_a_merge(engram) -> None:
    _, small, _, moved, decision = _small_merged(engram)
    node = engram.store.get(MemoryNode, moved[0])
    node.flag_dying(10_000, engram.clock.now())  # many cycles later: decayed
    engram.store.save(node)
    with pytest.raises(UndoRefused, match=f"node {moved[0]} died since the merge \\(FlaggedDying"):
        engram.undo.undo(decision, reason="x")
    assert engram.store.get(Cluster, small.id).deleted


def test_over_http_an_admin_undoes_a_split(engram) -> None:
    from fastapi.testclient import TestClient

    from engram.adapters.http import HttpSettings, create_app
    from engram.services.tokens import TokenService

    w, big, part, taken, decision = _split(engram)
    admin = {"Authorization": f"Bearer {TokenService(engram).issue(admin=True).token}"}
    being = {"Authorization": f"Bearer {TokenService(engram).issue(being='Aria').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        assert client.post(f"/v1/admin/undo/{decision}", headers=being).status_code == 403
        plan = client.post(f"/v1/admin/undo/{decision}", headers=admin, json={"dry_run": True})
        assert plan.status_code == 200, plan.text
        [step] = plan.json()["steps"]
        assert (step["kind"], step["into"], sorted(step["released"])) == (
            "cluster-split",
            str(big.id),
            sorted(taken),
        )
        assert plan.json()["applied"] is False and w.cluster_of(UUID(taken[0])) == part
        done = client.post(f"/v1/admin/undo/{decision}", headers=admin, json={"reason": "one topic"})
        assert done.status_code == 200, done.text
        assert done.json()["applied"] is True
        assert {w.cluster_of(UUID(n)) for n in taken} == {big.id}
        again = client.post(f"/v1/admin/undo/{decision}", headers=admin)
        assert again.status_code == 409 and again.json()["code"] == "already_undone"


def test_a_consolidation_whose_absorbed_node_a_cluster_merge_moved_since_is_undone_by_cascade(engram) -> None:
    """❹ merged the two nodes of `Small`; ❼ then moved both (the absorbed one dead) into `Nearer`. The
    consolidation depends on that merge: refused with it named, or undone after it by `--cascade`."""
    w = World(engram)
    small = w.cluster("Small", w.roots["Private"])
    nearer = w.cluster("Nearer", w.roots["Private"])
    pair = w.nodes(small, 2, 0.0)
    w.nodes(nearer, 5, w.angle_for(w.threshold + 0.1))
    engram.patrol("Aria", llm=ScriptedLLM({"consolidate_cluster": merge_first_two}))
    engram.views.ensure()
    [consolidation] = [d for d in _merges(engram, w.being_id) if UUID(d.split("@")[0]) in pair]
    [absorbed] = [n for n in pair if str(n) != consolidation.split("@")[0]]
    assert engram.store.get(Cluster, small.id).deleted and w.cluster_of(absorbed) == nearer.id
    merge = _cluster_decision(engram, small.id, "Cluster.Deleted")

    with pytest.raises(UndoRefused, match=f"depend on it: {merge}"):
        engram.undo.undo(consolidation, reason="x")
    result = engram.undo.undo(consolidation, reason="two scenes", cascade=True)

    assert [s.decision for s in result.plan.steps] == [merge, consolidation]
    assert {w.cluster_of(n) for n in pair} == {small.id}
    assert engram.store.get(MemoryNode, absorbed).status == "active"
    row = w.cluster_row(small)
    assert row is not None and (row["active_count"], row["total_count"]) == (2, 2)
