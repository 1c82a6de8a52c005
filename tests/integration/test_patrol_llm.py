"""Patrol with a scripted LLM: every branch of ❹, ❻, classification, repair and the diary, on both backends.

Hostile and malformed answers included: whatever the model says, only the valid part of a plan is
applied, every rejected item is recorded with its reason on the `PatrolRun`, and nothing reaches
another cluster or another being.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID, uuid4

import pytest
from structlog.testing import capture_logs

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.errors import RootClusterImmutable
from engram.domain.node import MemoryNode, NodeStatus
from engram.domain.note import Note
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.patrol.run import PatrolAlreadyRunning
from engram.services.ports import LLMTransientError
from engram.services.thresholds import thresholds_for
from tests.patrol_support import (
    GOOD_DIARY,
    UNRELATED,
    Call,
    ScriptedLLM,
    decisions,
    history_types,
    merge_first_two,
    note_scenes,
    patrol_run,
    reasons,
    scene,
    topic_scenes,
    unrelated_scenes,
)
from tests.support import SeededIds, SteppingClock

BYOK_LINE = "[graph] BYOK key not set: skipping ❹❻ diary/think_md (mechanical processing only)"


def _register(engram: Any, name: str = "Aria") -> UUID:
    return UUID(engram.beings.register(name).being_id)


def _rows(engram: Any, being_id: UUID, **filters: Any) -> dict[str, dict[str, Any]]:
    """The being's nodes in the read model, by action."""
    engram.views.ensure()
    return {n["action"]: n for n in engram.views.read.nodes(being_id, **filters)}


def _node(engram: Any, node_id: str) -> MemoryNode:
    return engram.store.get(MemoryNode, UUID(node_id))


def _clusters(engram: Any, being_id: UUID) -> dict[str, dict[str, Any]]:
    engram.views.ensure()
    return {c["name"]: c for c in engram.views.read.clusters(being_id)}


def _step(report: Any, name: str) -> dict[str, Any]:
    return next(s for s in report.steps if s["step"] == name)


def being_root(engram: Any, being_id: UUID, name: str) -> UUID:
    return engram.store.get(Being, being_id).root_ids[name]


# -- ❹ consolidation ------------------------------------------------------------------------------

# The merges these tests script (A absorbs B or C, B absorbs E) are alike enough to pass the hashing
# embedder's merge floor of 0.25 (ADR 0027; cosines 0.40, 0.28, 0.44), yet no three of the six are
# mutually similar enough (0.30) to be born into a sub-cluster: all stay in the Private root.
A, B, C, D, E, F = (
    "Walked the dog along the river",
    "Walked the dog, then painted a watercolor of tulips",
    "Fixed the leaking bathroom faucet",
    "Read a novel about whales",
    "Painted a second watercolor of tulips",
    "Called grandmother on her birthday",
)


def test_consolidation_merges_lets_dying_go_and_unfreshes_the_rest(engram) -> None:
    being_id = _register(engram)
    note_scenes(
        engram,
        "Aria",
        [
            scene(A, "2021-01-03"),
            scene(B, "2022-02-14", importance=0.98),
            scene(C, "2023-03-25"),
            scene(D, "2024-04-06", importance=0.05),  # dying at once: 0.05 × exp(−1/30) ≤ 0.05
            scene(E, "2025-05-17"),
            scene(F, "2020-06-28"),
        ],
    )

    def consolidate(call: Call) -> dict[str, Any]:
        assert {m.action for m in call.memories} == {A, B, C, D, E, F}
        assert [m.action for m in call.memories if m.dying] == [D]
        return {
            "merges": [
                {"survivor": call.id_of(A), "absorbed": [call.id_of(C)], "reason": "same walk"},
                {"survivor": call.id_of(B), "absorbed": [call.id_of(E)], "reason": "same week"},
            ],
            "make_dead": [call.id_of(D)],
        }

    llm = ScriptedLLM({"consolidate_cluster": [consolidate]})
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("consolidate_cluster")) == 1
    counts = _step(report, "consolidate")["counts"]
    assert counts == {"clusters": 1, "merged": 2, "made_dead": 1, "unfreshed": 2, "rejected": 0}
    rows = _rows(engram, being_id)
    a, b, c, d, e, f = (_node(engram, rows[x]["id"]) for x in (A, B, C, D, E, F))
    assert a.importance == pytest.approx(0.55) and b.importance == 1.0  # +0.05, capped at 1.0
    assert a.scene["when"] == ["2021-01-03", {"date": "2023-03-25", "action": C}]
    assert b.scene["when"] == ["2022-02-14", {"date": "2025-05-17", "action": E}]
    assert (c.status, c.absorbed_into, e.status, e.absorbed_into) == ("dead", a.id, "dead", b.id)
    assert d.status == NodeStatus.DEAD and "MemoryNode.MadeDead" in history_types(engram, "node", d.id)
    assert not any(n.fresh for n in (a, b, f))
    assert (a.status, b.status, f.status) == ("active", "active", "active")
    # The view agrees.
    assert rows[A]["importance"] == pytest.approx(0.55) and rows[B]["importance"] == 1.0
    assert {rows[x]["status"] for x in (C, D, E)} == {"dead"} and not rows[F]["fresh"]
    # The decision is on the run: model, prompt version, raw answer, plan, nothing rejected.
    [decision] = decisions(patrol_run(engram, being_id, 1), "consolidate_cluster").values()
    assert decision["subject"] == str(being_root(engram, being_id, "Private"))
    assert decision["model"] == "scripted-reasoning" and decision["rejected"] == []
    assert decision["parsed_plan"]["make_dead"] == [str(d.id)] and decision["raw_answer"].startswith("{")


def test_hostile_consolidation_items_are_rejected_and_recorded_the_rest_applied(engram) -> None:
    bob_id = _register(engram, "Bob")
    note_scenes(engram, "Bob", [scene("Walked the dog along the river", "2021-01-03")])
    engram.patrol("Bob")
    [bob_node] = _rows(engram, bob_id).values()
    bob_history = engram.audit.history("node", bob_node["id"])
    bob_log = engram.audit.log(being="Bob", limit=10_000)

    being_id = _register(engram)
    note_scenes(
        engram,
        "Aria",
        [
            scene("Pinned memory of my wedding", "2019-07-09"),
            scene("Met the client about the invoice", "2018-08-21"),
        ],
    )
    engram.patrol("Aria")  # no LLM: both stay fresh
    first = _rows(engram, being_id)
    pinned_id, business_id = (
        first["Pinned memory of my wedding"]["id"],
        first["Met the client about the invoice"]["id"],
    )
    engram.nodes.pin("Aria", UUID(pinned_id))
    note_scenes(
        engram,
        "Aria",
        [
            scene(A, "2021-01-03"),
            scene(B, "2022-02-14"),
            scene(C, "2023-03-25"),
            scene(E, "2025-05-17"),
            scene(D, "2024-04-06", importance=0.05),
            scene(F, "2020-06-28", importance=0.05),
        ],
    )
    stranger = str(uuid4())

    def hostile(call: Call) -> dict[str, Any]:
        a, b, c, e, d = (call.id_of(x) for x in (A, B, C, E, D))
        merge = lambda s, ab, why="dup": {"survivor": s, "absorbed": ab, "reason": why}  # noqa: E731
        return {
            "merges": [
                merge(a, [b], "valid"),
                merge(c, [stranger], "unknown id"),
                merge(c, [bob_node["id"]], "another being's node"),
                merge(c, [business_id], "another cluster's node"),
                merge(e, [a], "a node already in a merge"),
                merge(c, [c], "survivor also absorbed"),
                merge(c, [pinned_id], "pinned absorbed"),
                merge("'; DROP TABLE nodes; --", [e], "not an id"),
                merge(c, [], "absorbs nothing"),
            ],
            "make_dead": [d, pinned_id, c, bob_node["id"], stranger, b, d],
        }

    llm = ScriptedLLM(
        {
            "consolidate_cluster": lambda call: (
                hostile(call) if '"Private"' in call.prompt else {"merges": [], "make_dead": []}
            )
        }
    )
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("consolidate_cluster")) == 2  # Private (hostile) and Business (empty plan)
    counts = _step(report, "consolidate")["counts"]
    assert (counts["merged"], counts["made_dead"], counts["rejected"]) == (1, 1, 13)
    rows = _rows(engram, being_id)
    assert rows[A]["importance"] == pytest.approx(0.55) and rows[B]["status"] == "dead"
    assert rows[D]["status"] == "dead"
    assert rows[F]["status"] == "dying"  # no decision about it: stays dying until a later ❹
    assert rows[C]["status"] == rows[E]["status"] == "active"
    assert (
        rows["Pinned memory of my wedding"]["status"] == "active"
        and rows["Pinned memory of my wedding"]["pinned"]
    )
    assert rows["Met the client about the invoice"]["status"] == "active"
    assert not any(r["fresh"] for r in rows.values() if r["status"] != "dead")
    # Nothing crossed to Bob.
    assert engram.audit.history("node", bob_node["id"]) == bob_history
    assert engram.audit.log(being="Bob", limit=10_000) == bob_log
    # Every rejection is on the run, with its reason.
    run = patrol_run(engram, being_id, 2)
    private = decisions(run, "consolidate_cluster")[str(being_root(engram, being_id, "Private"))]
    by_reason = reasons(private)
    assert len(by_reason) == 13
    assert (
        sum("unknown or foreign ids" in r for r in by_reason) == 4
    )  # stranger, Bob's, other cluster, not-an-id
    assert sum("already in another merge" in r for r in by_reason) == 1
    assert sum("appears twice" in r for r in by_reason) == 1
    assert sum("pinned nodes" in r for r in by_reason) == 1
    assert sum("absorbs at least one" in r for r in by_reason) == 1
    assert sum("unknown or foreign id in make_dead" in r for r in by_reason) == 2
    assert sum("pinned node is never made dead" in r for r in by_reason) == 1
    assert sum("only dying nodes are made dead" in r for r in by_reason) == 1
    assert sum("part of a merge" in r for r in by_reason) == 1
    rejected_items = [r["item"] for r in private["rejected"]]
    assert bob_node["id"] in rejected_items and stranger in rejected_items


EXTRA_FIELD = '{"merges": [], "make_dead": [], "delete_everything": true}'


@pytest.mark.parametrize(
    "second",
    ['{"merges": "all", "make_dead": []}', EXTRA_FIELD],
    ids=["wrong-type", "unknown-field"],
)
def test_malformed_twice_skips_the_cluster_and_records_the_rejection(engram, second: str) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(3))
    llm = ScriptedLLM({"consolidate_cluster": ["Sure! Here is the plan: merge them all.", second]})
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("consolidate_cluster")) == 2  # one retry, no more
    assert _step(report, "consolidate")["counts"] == {"clusters": 1, "clusters_skipped": 1}
    assert all(r["fresh"] and r["status"] == "active" for r in _rows(engram, being_id).values())
    [decision] = decisions(patrol_run(engram, being_id, 1), "consolidate_cluster").values()
    assert decision["parsed_plan"] is None and decision["raw_answer"] == second
    [why] = reasons(decision)
    assert "malformed answer" in why and "after one retry" in why

    engram.patrol("Aria", llm=llm)  # the next patrol asks again (neutral answer) and unfreshes
    assert not any(r["fresh"] for r in _rows(engram, being_id).values())


def test_malformed_once_then_valid_is_applied(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", [scene(A, "2021-01-03"), scene(B, "2022-02-14")])

    def merge(call: Call) -> dict[str, Any]:
        return {
            "merges": [{"survivor": call.id_of(A), "absorbed": [call.id_of(B)], "reason": "x"}],
            "make_dead": [],
        }

    llm = ScriptedLLM({"consolidate_cluster": ['{"merges": [', merge]})
    engram.patrol("Aria", llm=llm)
    assert len(llm.calls_for("consolidate_cluster")) == 2
    rows = _rows(engram, being_id)
    assert rows[B]["status"] == "dead" and rows[B]["absorbed_into"] == rows[A]["id"]
    [decision] = decisions(patrol_run(engram, being_id, 1), "consolidate_cluster").values()
    assert decision["rejected"] == [] and decision["parsed_plan"]["merges"][0]["survivor"] == rows[A]["id"]


def test_transient_errors_skip_the_llm_step_with_the_reason(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(2) + topic_scenes("baking", 12))
    outage = LLMTransientError("anthropic still failing after 4 attempts: HTTP 529 Overloaded")
    llm = ScriptedLLM({"consolidate_cluster": outage, "split_cluster": outage, "write_diary": outage})
    report = engram.patrol("Aria", llm=llm)

    for step in ("consolidate", "split", "diary"):
        entry = _step(report, step)
        assert entry["state"] == "skipped" and "HTTP 529 Overloaded" in entry["reason"], step
        assert patrol_run(engram, being_id, 1).steps[step]["state"] == "skipped"
        assert "HTTP 529" in patrol_run(engram, being_id, 1).steps[step]["reason"]
    # One question per step: the adapter already spent its bounded retries.
    assert llm.tasks().count("consolidate_cluster") == 1
    assert llm.tasks().count("split_cluster") == 1 and llm.tasks().count("write_diary") == 1
    run = patrol_run(engram, being_id, 1)
    assert run.finished and not decisions(run, "consolidate_cluster") and not decisions(run, "split_cluster")
    assert all(r["fresh"] for r in _rows(engram, being_id).values())  # ❹ is asked again next time
    assert _step(report, "merge_small")["state"] == "finished"


# -- ❻ split --------------------------------------------------------------------------------------


def test_split_applies_valid_groups_and_rejects_the_rest(engram) -> None:
    bob_id = _register(engram, "Bob")
    note_scenes(engram, "Bob", [scene("Walked the dog along the river", "2021-01-03")])
    engram.patrol("Bob")
    [bob_node] = _rows(engram, bob_id).values()

    being_id = _register(engram)
    note_scenes(engram, "Aria", [*topic_scenes("baking", 16), scene(A, "2021-01-03")])
    outsider: dict[str, str] = {}  # a node of Aria's in another cluster (the root), found in the prompt of ❹

    def remember_root_node(call: Call) -> dict[str, Any]:
        if '"Private"' in call.prompt:
            outsider["id"] = call.id_of(A)
        return {"merges": [], "make_dead": []}

    def split(call: Call) -> dict[str, Any]:
        ids = call.ids
        assert len(ids) == 16
        group = lambda name, members: {"name": name, "node_ids": members}  # noqa: E731
        return {
            "groups": [
                group("Rye loaves", ids[0:3]),
                group("Too small", ids[3:4]),
                group("With a stranger", [ids[4], str(uuid4())]),
                group("Overlapping", [ids[2], ids[5], ids[6]]),
                group("With Bob's", [ids[7], ids[8], bob_node["id"]]),
                group("With another cluster's", [ids[7], ids[8], outsider["id"]]),
                group("Night baking", ids[9:12]),
                group("Takes all but one", ids[3:9] + ids[12:15]),
                group("   ", ids[12:14]),
                group("x" * 500, ids[12:15]),
            ]
        }

    llm = ScriptedLLM({"consolidate_cluster": remember_root_node, "split_cluster": [split]})
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("split_cluster")) == 1  # the root (with 1 node) and nothing else
    counts = _step(report, "split")["counts"]
    assert counts == {"clusters": 1, "new_clusters": 2, "nodes_moved": 6, "rejected": 8}
    clusters = _clusters(engram, being_id)
    assert clusters["Rye loaves"]["active_count"] == 3 and clusters["Night baking"]["active_count"] == 3
    [original] = [c for name, c in clusters.items() if name.startswith("Baked")]
    assert original["active_count"] == 10
    assert (
        clusters["Rye loaves"]["parent_id"]
        == original["parent_id"]
        == str(being_root(engram, being_id, "Private"))
    )
    run = patrol_run(engram, being_id, 1)
    [decision] = decisions(run, "split_cluster").values()
    assert decision["subject"] == original["id"]
    why = reasons(decision)
    assert sum("unknown or foreign ids" in r for r in why) == 3
    assert sum("a group needs at least 2 nodes" in r for r in why) == 1
    assert sum("already in another group" in r for r in why) == 1
    assert sum("must remain in the cluster" in r for r in why) == 1
    assert sum("needs a name" in r for r in why) == 1
    assert sum("at most 120 characters" in r for r in why) == 1
    assert engram.store.get(MemoryNode, UUID(bob_node["id"])).cluster_id == being_root(
        engram, bob_id, "Private"
    )
    assert _rows(engram, being_id)[A]["cluster_id"] == str(being_root(engram, being_id, "Private"))


def test_roots_are_never_split(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(14))
    llm = ScriptedLLM()
    engram.patrol("Aria", llm=llm)
    private = _clusters(engram, being_id)["Private"]
    assert private["is_root"] and private["active_count"] == 14  # > 10 active nodes, but a root
    assert "split_cluster" not in llm.tasks()
    root = engram.store.get(Cluster, UUID(private["id"]))
    with pytest.raises(RootClusterImmutable):
        Cluster.split_off(uuid4(), root, "Anything", engram.clock.now())


# -- ❶ classification, repair; sub-cluster names --------------------------------------------------


def test_classification_asks_the_llm_only_when_no_sub_cluster_matches(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", topic_scenes("climbing", 3))
    engram.patrol("Aria", llm=ScriptedLLM())
    [topic] = [c for c in _clusters(engram, being_id).values() if not c["is_root"]]

    dog, ducks = "Walked the dog along the river", "Fed ducks by a pond"
    [climb_note, dog_note, ducks_note] = note_scenes(
        engram,
        "Aria",
        [
            scene("Climbed Rainier north ridge alongside Lena in fog", "2026-05-02"),
            scene(dog, "2021-01-03"),
            scene(ducks, "2012-02-27"),
        ],
    )
    llm = ScriptedLLM({"classify_root": [{"root": "Business"}, "Private, I think", "Private, surely"]})
    report = engram.patrol("Aria", llm=llm)

    calls = llm.calls_for("classify_root")
    assert len(calls) == 3  # none for the climbing scene; the malformed one retried once
    assert all(
        c.prompt.endswith(f"<memory>{a}</memory>") for c, a in zip(calls, (dog, ducks, ducks), strict=True)
    )
    counts = _step(report, "notes_to_nodes")["counts"]
    assert counts["assigned_to_subcluster"] == 1 and counts["llm_classified"] == 1
    rows = _rows(engram, being_id)
    assert rows["Climbed Rainier north ridge alongside Lena in fog"]["cluster_id"] == topic["id"]
    assert rows[dog]["cluster_id"] == str(being_root(engram, being_id, "Business"))  # the model's choice
    assert rows[ducks]["cluster_id"] == str(being_root(engram, being_id, "Private"))  # the fallback's
    made = decisions(patrol_run(engram, being_id, 2), "classify_root")
    assert set(made) == {dog_note, ducks_note} and climb_note not in made
    assert made[dog_note]["parsed_plan"] == {"root": "Business"} and made[dog_note]["rejected"] == []
    assert made[ducks_note]["parsed_plan"] is None and "after one retry" in reasons(made[ducks_note])[0]


def test_an_llm_outage_during_classification_falls_back_without_asking_every_note(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(6))
    llm = ScriptedLLM({"classify_root": LLMTransientError("openai still failing after 4 attempts: timeout")})
    engram.patrol("Aria", llm=llm)
    rows = _rows(engram, being_id)
    assert len(rows) == 6 and {r["cluster_id"] for r in rows.values()} == {
        str(being_root(engram, being_id, "Private"))
    }
    # Each call already cost the adapter's retries and backoff: after one outage, the fallback decides.
    assert len(llm.calls_for("classify_root")) == 1


PROSE = "Went to the climbing gym with Lena on 2026-05-02 and finally sent the blue route"


def _repair(**overrides: Any) -> dict[str, Any]:
    answer = {
        "action": "Sent the blue route at the climbing gym with Lena",
        "actors": ["me", "Lena"],
        "when": ["2026-05-02"],
        "setting": "the climbing gym",
        "feeling": "proud",
        "importance": 0.7,
        "themes": ["climbing"],
    }
    return {**answer, **overrides}


def _prose_note(engram: Any, text: str = PROSE) -> str:
    taken = engram.notes.take("Aria", NoteInput(text=text))
    assert taken.parsed is False
    return taken.note_id


def test_a_valid_repair_becomes_a_node_in_the_same_patrol(engram) -> None:
    being_id = _register(engram)
    note_id = _prose_note(engram)
    llm = ScriptedLLM({"repair_scene": [_repair()]})
    report = engram.patrol("Aria", llm=llm)

    [call] = llm.calls_for("repair_scene")
    assert PROSE in call.prompt and call.model_class == "fast"
    assert _step(report, "notes_to_nodes")["counts"]["repaired"] == 1
    note = engram.store.get(Note, UUID(note_id))
    assert note.text == PROSE and note.parse_status == "processed"
    assert history_types(engram, "note", note_id)[-2:] == ["Note.Repaired", "Note.Processed"]
    node = _node(engram, str(note.node_id))
    assert node.scene["action"] == "Sent the blue route at the climbing gym with Lena"
    assert node.importance == 0.7 and node.feeling == "proud" and node.source_note_id == note.id
    [decision] = decisions(patrol_run(engram, being_id, 1), "repair_scene").values()
    assert decision["subject"] == note_id and decision["rejected"] == []


def test_a_repair_without_dates_is_dated_by_its_note(engram) -> None:
    """The repair prompt tells the model to leave `when` empty when the text gives no date."""
    _register(engram)
    note_id = _prose_note(engram, "felt great after the long run by the lake")
    llm = ScriptedLLM({"repair_scene": [_repair(action="Ran a long way by the lake", when=[])]})
    engram.patrol("Aria", llm=llm)
    note = engram.store.get(Note, UUID(note_id))
    assert note.parse_status == "processed", note.parse_error
    node = _node(engram, str(note.node_id))
    assert node.scene["when"] == [note.created_on.date().isoformat()]


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        ([_repair(when=["last Tuesday"])], "YYYY-MM-DD"),
        (["I could not understand the note", '{"action": 3}'], "after one retry"),
        ([_repair(actors=[])], "actors"),
    ],
    ids=["invalid-scene", "malformed-twice", "no-actors"],
)
def test_a_rejected_repair_leaves_the_note_failed_and_is_not_retried(
    engram, answers: list[Any], reason: str
) -> None:
    being_id = _register(engram)
    note_id = _prose_note(engram)
    llm = ScriptedLLM({"repair_scene": answers})
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("repair_scene")) == len(answers)
    assert _step(report, "notes_to_nodes")["counts"]["repair_rejected"] == 1
    note = engram.store.get(Note, UUID(note_id))
    assert note.parse_status == "failed" and note.node_id is None and note.text == PROSE
    rejected = [e for e in engram.audit.history("note", note_id) if e["type"] == "Note.RepairRejected"]
    assert len(rejected) == 1 and reason in rejected[0]["payload"]["reason"]
    [decision] = decisions(patrol_run(engram, being_id, 1), "repair_scene").values()
    assert any(reason in r for r in reasons(decision))
    assert _rows(engram, being_id) == {}

    again = ScriptedLLM()  # no repair scripted: a second attempt would raise UnexpectedCall
    engram.patrol("Aria", llm=again)
    assert "repair_scene" not in again.tasks()
    assert engram.store.get(Note, UUID(note_id)).repair_attempts == 1


def test_a_repair_during_an_outage_is_deferred_to_the_next_patrol(engram) -> None:
    _register(engram)
    note_id = _prose_note(engram)
    engram.patrol("Aria", llm=ScriptedLLM({"repair_scene": LLMTransientError("HTTP 503")}))
    note = engram.store.get(Note, UUID(note_id))
    assert note.parse_status == "failed" and note.repair_attempts == 0
    engram.patrol("Aria", llm=ScriptedLLM({"repair_scene": [_repair()]}))
    assert engram.store.get(Note, UUID(note_id)).parse_status == "processed"


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([{"name": "Mountain days"}], "Mountain days"),
        ([{"name": "   "}], "Climbing"),  # blank: the fallback (the most common theme)
        (["no idea", "still no idea"], "Climbing"),  # malformed twice: the fallback
        ([{"name": "Peaks " * 2000}], ("Peaks " * 20).strip()),  # bounded: at most 120 characters
    ],
    ids=["named", "blank", "malformed", "huge"],
)
def test_sub_cluster_birth_is_named_by_the_llm(engram, answers: list[Any], expected: str) -> None:
    being_id = _register(engram)
    texts = [
        scene(a, "2026-05-02", themes=["climbing"])
        for a in (
            "Climbed the north ridge with Lena",
            "Climbed the north ridge with Lena again",
            "Climbed the north ridge with Lena at dawn",
        )
    ]
    note_scenes(engram, "Aria", texts)
    llm = ScriptedLLM({"name_cluster": answers})
    report = engram.patrol("Aria", llm=llm)

    assert _step(report, "birth_subclusters")["counts"] == {"subclusters_born": 1, "nodes_moved": 3}
    [call, *_] = llm.calls_for("name_cluster")
    assert len(call.memories) == 3
    [born] = [c for c in _clusters(engram, being_id).values() if not c["is_root"]]
    assert born["name"] == expected and born["active_count"] == 3
    [decision] = decisions(patrol_run(engram, being_id, 1), "name_cluster").values()
    assert decision["subject"] == born["id"]


# -- diary ----------------------------------------------------------------------------------------


def test_a_valid_diary_is_written_with_think_md(engram) -> None:
    being_id = _register(engram)
    engram.beings.define_soul("Aria", "A curious climber who bakes on Sundays.")
    note_scenes(engram, "Aria", topic_scenes("climbing", 1))
    llm = ScriptedLLM({"write_diary": [GOOD_DIARY]})
    report = engram.patrol("Aria", llm=llm)

    [call] = llm.calls_for("write_diary")
    assert "A curious climber" in call.prompt and "Rainier" in call.prompt
    assert _step(report, "diary")["counts"] == {"diary_written": 1}
    being = engram.store.get(Being, being_id)
    date = patrol_run(engram, being_id, 1).created_on.date().isoformat()
    assert being.diary == {date: GOOD_DIARY["diary"]}
    assert being.think_md == "- Lena climbs faster now\n- Bring a warmer jacket\n- Bake bread on Sunday"
    assert decisions(patrol_run(engram, being_id, 1), "write_diary")[date]["rejected"] == []


TWO_LINES = {"diary": "One line.\nTwo lines.", "think_md": ["a", "b", "c"]}
EIGHT_NOTES = {"diary": "One.\nTwo.\nThree.", "think_md": [f"note {i}" for i in range(8)]}


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        ([TWO_LINES, TWO_LINES], "the diary has 2 lines, not 3 to 5"),
        ([EIGHT_NOTES, EIGHT_NOTES], "think_md has 8 notes, not 3 to 7"),
        ([TWO_LINES, "{", "{"], "malformed answer"),
    ],
    ids=["two-lines", "eight-notes", "short-then-malformed"],
)
def test_an_unusable_diary_is_retried_once_then_skipped_with_the_reason(
    engram, answers: list[Any], reason: str
) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", topic_scenes("climbing", 1))
    llm = ScriptedLLM({"write_diary": answers})
    report = engram.patrol("Aria", llm=llm)

    assert len(llm.calls_for("write_diary")) == len(answers)
    entry = _step(report, "diary")
    assert entry["state"] == "skipped" and reason in entry["reason"]
    run = patrol_run(engram, being_id, 1)
    assert run.steps["diary"]["state"] == "skipped" and reason in run.steps["diary"]["reason"]
    [decision] = decisions(run, "write_diary").values()
    assert any(reason in r for r in reasons(decision))
    being = engram.store.get(Being, being_id)
    assert being.diary == {} and being.think_md == ""


def test_a_short_diary_then_a_good_one_is_written(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", topic_scenes("climbing", 1))
    llm = ScriptedLLM({"write_diary": [TWO_LINES, GOOD_DIARY]})
    engram.patrol("Aria", llm=llm)
    assert len(llm.calls_for("write_diary")) == 2
    assert list(engram.store.get(Being, being_id).diary.values()) == [GOOD_DIARY["diary"]]


def test_an_oversized_diary_is_refused_without_breaking_the_patrol(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", topic_scenes("climbing", 1))
    huge = {"diary": "\n".join(["word " * 1000] * 3), "think_md": ["x" * 10_000] * 3}
    llm = ScriptedLLM({"write_diary": [huge]})
    report = engram.patrol("Aria", llm=llm)
    entry = _step(report, "diary")
    assert entry["state"] == "skipped" and "at most 8192 characters" in entry["reason"]
    run = patrol_run(engram, being_id, 1)
    assert (
        run.finished and "at most 8192 characters" in reasons(decisions(run, "write_diary").popitem()[1])[0]
    )
    assert engram.store.get(Being, being_id).diary == {}
    assert engram.patrol("Aria", llm=ScriptedLLM()).cycle == 2  # the being's patrols go on


def test_no_diary_without_new_scenes(engram) -> None:
    being_id = _register(engram)
    llm = ScriptedLLM()
    report = engram.patrol("Aria", llm=llm)
    assert llm.calls == []
    assert _step(report, "diary") == {
        "step": "diary",
        "state": "skipped",
        "reason": "no scene notes this cycle",
        "duration_ms": _step(report, "diary")["duration_ms"],
    }
    assert engram.store.get(Being, being_id).diary == {}


def test_a_diary_is_written_when_the_cycle_took_up_scene_notes_that_did_not_become_nodes(engram) -> None:
    """Spec: after ❼, "if there are any scene notes" (ADR 0040): a note that stays unparsed after its
    repair is one of them, and the diary is told its text."""
    being_id = _register(engram)
    _prose_note(engram)
    llm = ScriptedLLM({"repair_scene": [_repair(actors=[])], "write_diary": [GOOD_DIARY]})
    report = engram.patrol("Aria", llm=llm)

    assert _step(report, "notes_to_nodes")["counts"]["repair_rejected"] == 1
    assert _rows(engram, being_id) == {}
    assert _step(report, "diary")["counts"] == {"diary_written": 1}
    [call] = llm.calls_for("write_diary")
    assert PROSE in call.prompt
    assert list(engram.store.get(Being, being_id).diary.values()) == [GOOD_DIARY["diary"]]

    # Its one repair spent, the note is not taken up again: no diary for it at every patrol.
    again = ScriptedLLM()
    report = engram.patrol("Aria", llm=again)
    assert again.calls == []
    assert _step(report, "diary")["reason"] == "no scene notes this cycle"


def test_a_diary_counts_the_nodes_of_the_cycle_even_when_consolidation_absorbed_them(engram) -> None:
    """The scene notes were taken up even if ❹ then merged their nodes away: the diary still sees them."""
    being_id = _register(engram)
    note_scenes(engram, "Aria", [scene(A, "2021-01-03"), scene(B, "2022-02-14")])
    llm = ScriptedLLM({"consolidate_cluster": merge_first_two, "write_diary": [GOOD_DIARY]})
    report = engram.patrol("Aria", llm=llm)

    assert _step(report, "consolidate")["counts"]["merged"] == 1
    assert _step(report, "diary")["counts"] == {"diary_written": 1}
    [call] = llm.calls_for("write_diary")
    assert A in call.prompt and B in call.prompt
    assert len(_rows(engram, being_id, statuses=["dead"])) == 1


# -- without an LLM, dry runs, one patrol at a time -----------------------------------------------


def test_without_an_llm_key_the_llm_steps_are_skipped_with_the_spec_log_line(
    make_settings, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ENGRAM_LLM=auto` and no key anywhere: the key is truly missing, and the spec's line says so."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"ENGRAM_{name}", raising=False)
    with bootstrap(make_settings(llm="auto"), clock=clock, ids=SeededIds()) as engram:
        _skips_the_llm_steps_with_the_spec_line(engram)


def _skips_the_llm_steps_with_the_spec_line(engram: Any) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", [*topic_scenes("baking", 12), scene(D, "2024-04-06", importance=0.05)])
    with capture_logs() as logs:
        report = engram.patrol("Aria")

    byok = [entry for entry in logs if entry["event"] == BYOK_LINE]
    assert len(byok) == 1 and byok[0]["log_level"] == "warning"
    assert report.llm is None
    for step in ("consolidate", "split", "diary"):
        assert _step(report, step) == {"step": step, "state": "skipped", "reason": "BYOK key not set"}
    for step in ("notes_to_nodes", "start_cycle", "flag_dying", "revive", "merge_small"):
        assert _step(report, step)["state"] == "finished"
    run = patrol_run(engram, being_id, 1)
    assert run.llm is None and run.decisions == {} and run.finished
    rows = _rows(engram, being_id)
    assert rows[D]["status"] == "dying"  # ❸ ran; nobody decided in ❹
    assert all(r["fresh"] for r in rows.values())
    assert engram.store.get(Being, being_id).diary == {}


def test_dry_run_reports_what_would_change_and_writes_nothing(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", [scene(A, "2021-01-03", importance=0.06)])
    for _ in range(5):
        engram.patrol("Aria")  # 0.06 × exp(−6/30) ≤ 0.05: the node is flagged in patrol 6
    note_scenes(engram, "Aria", unrelated_scenes(4)[1:])
    _prose_note(engram)
    llm = ScriptedLLM()
    engram.views.ensure()
    head = engram.store.head()

    report = engram.patrol("Aria", dry_run=True, llm=llm)

    assert engram.store.head() == head and llm.calls == []
    assert engram.store.get(Being, being_id).cycle == 5
    assert report.dry_run and report.cycle == 6
    steps = {s["step"]: s for s in report.steps}
    assert steps["notes_to_nodes"]["counts"] == {
        "notes": 3,
        "failed_notes": 1,
        "repairable": 1,
        "would_create": 3,
    }
    private = str(being_root(engram, being_id, "Private"))
    assert [
        (n["action"], n["cluster_id"], n["cluster"]) for n in steps["notes_to_nodes"]["would_create"]
    ] == [(action, private, "Private") for action, _ in UNRELATED[1:4]]
    assert {(n["placed_by"], n["llm_decides"]) for n in steps["notes_to_nodes"]["would_create"]} == {
        ("keywords", True)
    }
    assert steps["diary"]["counts"] == {"scene_notes": 4}
    assert steps["start_cycle"]["counts"] == {"cycle": 6}
    assert steps["flag_dying"]["counts"] == {"would_flag": 1}
    assert steps["consolidate"]["state"] == "would_run"
    no_llm = engram.patrol("Aria", dry_run=True)
    assert {s["step"]: s["state"] for s in no_llm.steps}["consolidate"] == "would_skip"
    assert {n["llm_decides"] for n in no_llm.steps[0]["would_create"]} == {False}
    assert engram.store.head() == head

    real = engram.patrol("Aria")
    assert real.cycle == 6 and _step(real, "flag_dying")["counts"] == {"flagged_dying": 1}
    assert _rows(engram, being_id)[A]["status"] == "dying"


def test_dry_run_lists_each_would_be_node_with_the_cluster_the_patrol_then_gives_it(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", topic_scenes("climbing", 3))
    engram.patrol("Aria")  # three alike memories: a sub-cluster is born (ADR 0007)
    [born] = [c for c in _clusters(engram, being_id).values() if not c["is_root"]]
    climbing = scene("Climbed Rainier north ridge alongside Lena with friends", "2026-05-02")
    note_scenes(engram, "Aria", [climbing, scene(C, "2023-03-25")])
    head = engram.store.head()

    report = engram.patrol("Aria", dry_run=True)

    assert engram.store.head() == head
    first, second = _step(report, "notes_to_nodes")["would_create"]
    assert (first["action"], first["cluster_id"], first["cluster"], first["placed_by"]) == (
        "Climbed Rainier north ridge alongside Lena with friends",
        born["id"],
        born["name"],
        "similarity",
    )
    assert first["similarity"] >= thresholds_for(engram.embedder.model_id).cluster
    assert (second["action"], second["cluster"], second["placed_by"]) == (C, "Private", "keywords")
    assert _step(report, "diary")["counts"] == {"scene_notes": 2}

    engram.patrol("Aria")
    rows = _rows(engram, being_id)
    assert rows[first["action"]]["cluster_id"] == first["cluster_id"]
    assert rows[C]["cluster_id"] == second["cluster_id"]


def test_dry_run_says_the_diary_would_be_skipped_without_scene_notes(engram) -> None:
    _register(engram)
    report = engram.patrol("Aria", dry_run=True, llm=ScriptedLLM())
    assert _step(report, "diary") == {
        "step": "diary",
        "state": "would_skip",
        "counts": {"scene_notes": 0},
        "reason": "no scene notes this cycle",
    }
    assert _step(report, "notes_to_nodes")["would_create"] == []


def test_a_second_patrol_of_the_same_being_fails_fast(engram, make_settings) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(2))
    inside, release = threading.Event(), threading.Event()

    def slow_classify(call: Call) -> dict[str, Any]:
        inside.set()
        assert release.wait(30)
        return {"root": "Private"}

    llm = ScriptedLLM({"classify_root": slow_classify})
    outcome: dict[str, Any] = {}

    def first() -> None:
        try:
            outcome["report"] = engram.patrol("Aria", llm=llm)
        except BaseException as exc:  # reported to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(30), "the first patrol never reached the LLM"
        other = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(1000))
        try:
            started = time.monotonic()
            with pytest.raises(PatrolAlreadyRunning, match="already running"):
                other.patrol("Aria")
            assert time.monotonic() - started < 2
            assert engram.store.get(Being, being_id).cycle == 0  # the second one wrote nothing
        finally:
            other.close()
    finally:
        release.set()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["report"].cycle == 1
    assert engram.patrol("Aria").cycle == 2  # the lock was released


def test_a_held_patrol_lock_refuses_a_patrol_and_other_beings_patrol_on(engram) -> None:
    being_id = _register(engram)
    _register(engram, "Bob")
    lock = engram.views.named_lock(f"patrol:{being_id}")
    assert lock.try_acquire()
    try:
        with pytest.raises(PatrolAlreadyRunning, match="Aria"):
            engram.patrol("Aria")
        assert engram.patrol("Bob").cycle == 1
    finally:
        lock.release()
    assert engram.patrol("Aria").cycle == 1
