"""❹ and ❻ on a cluster larger than one prompt: asked in overlapping parts of alike nodes, no node
left out, each call recorded as its own decision (ADR 0041); on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from engram.domain.cluster import Cluster
from engram.services.bootstrap import Engram
from engram.services.patrol.with_llm import MAX_NODES_IN_PROMPT
from tests.patrol_support import Call, ScriptedLLM, UnexpectedCall, World, decisions, patrol_run


def _big_cluster(engram: Engram, groups: int = 4, per_group: int = 45) -> tuple[World, Cluster, list[str]]:
    """A sub-cluster of `groups` × `per_group` fresh nodes, each group alike and unlike the others."""
    w = World(engram)
    big = w.cluster("Mountain days", w.roots["Private"])
    ids = [str(i) for g in range(groups) for i in w.nodes(big, per_group, 0.0, plane=g)]
    assert len(ids) > MAX_NODES_IN_PROMPT
    return w, big, ids


def _step(report: Any, name: str) -> dict[str, Any]:
    return next(s for s in report.steps if s["step"] == name)


def test_consolidation_asks_a_large_cluster_in_overlapping_parts_each_recorded(engram: Engram) -> None:
    w, big, ids = _big_cluster(engram)
    llm = ScriptedLLM()

    report = engram.patrol("Aria", llm=llm)

    calls = llm.calls_for("consolidate_cluster")
    assert len(calls) == 2
    assert all(len(c.ids) <= MAX_NODES_IN_PROMPT for c in calls)
    assert sorted({i for c in calls for i in c.ids}) == sorted(ids)  # no node left out
    assert set(calls[0].ids) & set(calls[1].ids)  # the parts overlap
    assert "part 1 of 2" in calls[0].prompt and "part 2 of 2" in calls[1].prompt
    run = patrol_run(engram, w.being_id, 1)
    assert set(decisions(run, "consolidate_cluster")) == {f"{big.id}/part-1", f"{big.id}/part-2"}
    assert _step(report, "consolidate")["counts"] == {
        "clusters": 1,
        "parts": 2,
        "unfreshed": len(ids),
        "rejected": 0,
    }
    engram.views.ensure()
    assert engram.views.read.nodes(w.being_id, fresh=True) == []


def test_merges_of_one_part_are_applied_before_the_next_part_is_asked(engram: Engram) -> None:
    """The first part merges each group it shows whole into one survivor; the nodes it absorbed, some
    of which the second part borrowed as context, are no longer shown to the second part."""
    w, _, ids = _big_cluster(engram)
    groups = [ids[g * 45 : (g + 1) * 45] for g in range(4)]
    absorbed: list[str] = []

    def merge_whole_groups(call: Call) -> dict[str, Any]:
        if absorbed:
            return {"merges": [], "make_dead": []}
        merges = []
        for group in groups:
            if set(group) <= set(call.ids):
                merges.append({"survivor": group[0], "absorbed": group[1:], "reason": "one day"})
                absorbed.extend(group[1:])
        return {"merges": merges, "make_dead": []}

    llm = ScriptedLLM({"consolidate_cluster": merge_whole_groups})
    report = engram.patrol("Aria", llm=llm)

    first, second = llm.calls_for("consolidate_cluster")
    whole = len(absorbed) // 44
    assert whole >= 1 and len(first.ids) == whole * 45 + 20
    assert not set(absorbed) & set(second.ids)
    assert len(second.ids) <= len(ids) - whole * 45 + whole  # its own, and at most the survivors borrowed
    assert _step(report, "consolidate")["counts"]["merged"] == len(absorbed)
    engram.views.ensure()
    assert {r["id"] for r in engram.views.read.nodes(w.being_id, statuses=["dead"])} == set(absorbed)


def test_split_asks_a_large_cluster_in_parts_and_applies_each_part(engram: Engram) -> None:
    w, big, ids = _big_cluster(engram)

    def carve_three(call: Call) -> dict[str, Any]:
        k = len(llm.calls_for("split_cluster"))
        return {"groups": [{"name": f"Ridge walks {k}", "node_ids": call.ids[:3]}]}

    llm = ScriptedLLM({"split_cluster": carve_three})
    report = engram.patrol("Aria", llm=llm)

    calls = llm.calls_for("split_cluster")
    assert len(calls) == 2 and all(len(c.ids) <= MAX_NODES_IN_PROMPT for c in calls)
    assert sorted({i for c in calls for i in c.ids}) == sorted(ids)
    assert not set(calls[0].ids[:3]) & set(calls[1].ids)  # moved away: not shown to the next part
    assert _step(report, "split")["counts"] == {
        "clusters": 1,
        "parts": 2,
        "new_clusters": 2,
        "nodes_moved": 6,
        "rejected": 0,
    }
    run = patrol_run(engram, w.being_id, 1)
    split_decisions = decisions(run, "split_cluster")
    assert set(split_decisions) == {f"{big.id}/part-1", f"{big.id}/part-2"}
    assert all(d["rejected"] == [] for d in split_decisions.values())
    engram.views.ensure()
    clusters = {c["name"]: c for c in engram.views.read.clusters(w.being_id)}
    assert clusters["Ridge walks 1"]["active_count"] == 3 and clusters["Ridge walks 2"]["active_count"] == 3
    assert clusters["Mountain days"]["active_count"] == len(ids) - 6
    assert clusters["Ridge walks 1"]["parent_id"] == str(w.roots["Private"].id)


def test_split_in_parts_keeps_two_nodes_in_the_cluster_counting_the_nodes_not_shown(engram: Engram) -> None:
    """Part 1 may carve out every node it shows, since the cluster's other nodes stay; part 2, shown the
    last nodes, may not take them all."""
    w, _, ids = _big_cluster(engram, groups=2, per_group=76)

    def carve_everything(call: Call) -> dict[str, Any]:
        k = len(llm.calls_for("split_cluster"))
        return {"groups": [{"name": f"Everything {k}", "node_ids": call.ids}]}

    llm = ScriptedLLM({"split_cluster": carve_everything})
    report = engram.patrol("Aria", llm=llm)

    first, second = llm.calls_for("split_cluster")
    assert len(first.ids) == 96 and len(second.ids) == len(ids) - 96  # the borrowed 20 moved with part 1
    counts = _step(report, "split")["counts"]
    assert (counts["new_clusters"], counts["nodes_moved"], counts["rejected"]) == (1, 96, 1)
    [second_decision] = [
        d
        for s, d in decisions(patrol_run(engram, w.being_id, 1), "split_cluster").items()
        if s.endswith("part-2")
    ]
    assert "at least 2 nodes must remain" in second_decision["rejected"][0]["reason"]
    engram.views.ensure()
    clusters = {c["name"]: c for c in engram.views.read.clusters(w.being_id)}
    assert clusters["Everything 1"]["active_count"] == 96
    assert clusters["Mountain days"]["active_count"] == len(ids) - 96


def test_a_patrol_killed_between_two_parts_resumes_at_the_part_not_decided(engram: Engram) -> None:
    w, big, ids = _big_cluster(engram)

    def second_call_crashes(call: Call) -> dict[str, Any]:
        if len(crashing.calls_for("consolidate_cluster")) > 1:
            raise UnexpectedCall("killed while asking the second part")
        return {"merges": [], "make_dead": []}

    crashing = ScriptedLLM({"consolidate_cluster": second_call_crashes})
    with pytest.raises(UnexpectedCall):
        engram.patrol("Aria", llm=crashing)
    first = crashing.calls_for("consolidate_cluster")[0]
    run = patrol_run(engram, w.being_id, 1)
    assert set(decisions(run, "consolidate_cluster")) == {f"{big.id}/part-1"}

    resumed = ScriptedLLM()
    report = engram.patrol("Aria", llm=resumed)

    assert report.resumed and report.cycle == 1
    [again] = resumed.calls_for("consolidate_cluster")  # part 1 is not asked twice
    assert "part 2 of 2" in again.prompt
    assert sorted(set(first.ids) | set(again.ids)) == sorted(ids)
    run = patrol_run(engram, w.being_id, 1)
    assert run.finished
    assert set(decisions(run, "consolidate_cluster")) == {f"{big.id}/part-1", f"{big.id}/part-2"}
