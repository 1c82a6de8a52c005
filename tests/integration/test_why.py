"""Issue #13, `engram why` (ADR 0068), on both backends: a memory's lineage through a real patrol
with a scripted LLM, a fact extraction and a session with summaries; the tree's shape is pinned;
unknown ids and another being's ids are not found."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from engram.domain.ids import message_id_for_key
from engram.services import lineage
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.dream_compaction import COMPACTION_TASK
from engram.services.errors import NotFound
from engram.services.importance_prompts import IMPORTANCE_PROMPT_VERSION
from engram.services.lineage import why_text
from tests.integration.test_dream_tidying import BUDGET, SYNTHESIS, _lines
from tests.integration.test_dream_tidying import _steps as _only_steps
from tests.integration.test_memory_links import _being, _steps
from tests.integration.test_memory_links import _node as _link_node
from tests.integration.test_sleep_compacting import _compacting_only, _say, scores_of
from tests.integration.test_sleep_compacting import _llm as _importance_llm
from tests.patrol_support import ScriptedLLM, merge_first_two, note_scenes, scene
from tests.session_support import CHAT, T0, chat, summarize

A = "Walked the dog along the river"
B = "Walked the dog, then painted a watercolor of tulips"


def _types(tree: dict[str, Any]) -> list[str]:
    return [e["type"] for e in tree["events"]]


def _child(tree: dict[str, Any], relation: str) -> dict[str, Any]:
    [found] = [c for c in tree["children"] if c["relation"] == relation]
    return found


def _merged(with_llm: Callable[..., Engram]) -> tuple[Engram, list[str], dict[str, Any]]:
    engram = with_llm(ScriptedLLM({"consolidate_cluster": merge_first_two}))
    being_id = UUID(engram.beings.register("Aria").being_id)
    notes = note_scenes(engram, "Aria", [scene(A, "2021-01-03"), scene(B, "2022-02-14")], prefix="k")
    engram.patrol("Aria")
    engram.views.ensure()
    [dead] = engram.views.read.nodes(being_id, statuses=["dead"])
    return engram, notes, dead


def test_a_merged_node_shows_its_sources_the_llm_decision_and_where_it_went(with_llm) -> None:
    engram, notes, dead = _merged(with_llm)

    report = engram.why.why("Aria", "node", dead["id"])

    tree = report["tree"]
    assert (report["kind"], tree["kind"], tree["relation"], report["truncated"]) == (
        "node",
        "node",
        "subject",
        False,
    )
    assert _types(tree)[0] == "MemoryNode.Created" and "MemoryNode.Absorbed" in _types(tree)
    positions = [e["position"] for e in tree["events"]]
    assert all(isinstance(p, int) for p in positions) and positions == sorted(positions)
    logged = {
        (x["aggregate_id"], x["version"]): x["position"] for x in engram.audit.log(being="Aria", limit=1000)
    }
    assert positions == [logged[(dead["id"], e["version"])] for e in tree["events"]]  # the log's own
    [decision] = [d for d in tree["decisions"] if d["task"] == "consolidate_cluster"]
    assert decision["source"] == "patrol" and decision["model"] == "scripted-reasoning"
    assert decision["prompt_version"] and dead["id"] in decision["raw_answer"]
    assert decision["validation"] == "accepted" and isinstance(decision["position"], int)
    assert not any(c["relation"] == "became node" for c in _child(tree, "source note")["children"])
    # The decision and the merge it made were saved together: adjacent in the log.
    absorbed = next(e for e in tree["events"] if e["type"] == "MemoryNode.Absorbed")
    assert abs(absorbed["position"] - decision["position"]) < 5
    source = _child(tree, "source note")
    assert source["kind"] == "note" and source["id"] in notes
    assert source["events"][0]["detail"]["idempotency_key"] in ("k-0", "k-1")
    survivor = _child(tree, "absorbed into")
    assert survivor["ref"] is True and survivor["kind"] == "node" and survivor["id"] != dead["id"]

    text = why_text(report)
    assert f"subject: node {dead['id']}" in text and "decision @" in text and "source note: note" in text


def test_the_survivor_holds_the_absorbed_node_and_its_note_as_subtrees(with_llm) -> None:
    engram, notes, dead = _merged(with_llm)
    survivor_id = next(
        c["id"]
        for c in engram.why.why("Aria", "node", dead["id"])["tree"]["children"]
        if c["relation"] == "absorbed into"
    )

    tree = engram.why.why("Aria", "node", survivor_id)["tree"]

    assert "MemoryNode.AbsorbedNodes" in _types(tree)
    absorbed = _child(tree, "absorbed")
    assert absorbed["id"] == dead["id"] and "MemoryNode.Absorbed" in _types(absorbed)
    assert _child(absorbed, "source note")["kind"] == "note"
    assert {_child(tree, "source note")["id"], _child(absorbed, "source note")["id"]} == set(notes)
    cluster = _child(tree, "cluster")
    assert cluster.get("ref") is True
    # The cluster's own tree carries the same decision (its subject is the cluster).
    ctree = engram.why.why("Aria", "cluster", cluster["id"])["tree"]
    assert ctree["kind"] == "cluster" and any(d["task"] == "consolidate_cluster" for d in ctree["decisions"])


def test_a_note_shows_its_key_and_the_node_it_became(with_llm) -> None:
    engram, notes, _ = _merged(with_llm)

    tree = engram.why.why("Aria", "note", notes[0])["tree"]

    assert _types(tree)[0] == "Note.Noted" and tree["events"][0]["detail"]["idempotency_key"] == "k-0"
    assert _child(tree, "became node")["ref"] is True
    # The patrol that took it up asked a model where it belongs: that decision touched the note.
    [classify] = [d for d in tree["decisions"] if d["task"] == "classify_root"]
    assert classify["model"] == "scripted-fast" and classify["raw_answer"] and classify["cycle"] == 1


def test_an_extracted_fact_leads_to_its_message_and_the_extraction_decision(with_llm) -> None:
    answer = {"facts": [{"fact": "Lena works as a nurse at the city hospital", "type": "profile"}]}
    engram = with_llm(ScriptedLLM({"extract_facts": answer}, fallback={}))
    being_id = UUID(engram.beings.register("Aria").being_id)
    chat(engram, "Aria", "lena", [("user", "Hi! I'm Lena, I work as a nurse at the city hospital.")])
    engram.extraction.run_until_done("Aria")
    engram.views.ensure()
    with engram.views.read.reading("facts") as (conn, tables):
        [fact] = conn.query(f"SELECT id FROM {tables['facts']} WHERE owner_id = ?", [str(being_id)])

    report = engram.why.why("Aria", "fact", str(fact["id"]))

    tree = report["tree"]
    assert tree["kind"] == "fact" and _types(tree)[0] == "Fact.Stated"
    message = _child(tree, "source message")
    assert message["id"] == str(message_id_for_key(being_id, "m0"))
    assert message["events"][0]["detail"]["message_key"] == "m0"
    [extracted] = message["decisions"]
    assert extracted["source"] == "extraction" and extracted["task"] == "Extraction.Extracted"
    assert extracted["model"] == "scripted-fast" and extracted["answer"] and len(extracted["accepted"]) == 1
    assert isinstance(extracted["position"], int)


def test_a_session_shows_its_messages_and_its_summaries(engram: Engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    chat(engram, "Aria", "lena", CHAT[:4])
    chat(engram, "Aria", "lena", CHAT[4:6], start=T0 + timedelta(hours=3), prefix="b")  # closes the first
    summarize(engram, "Aria")
    engram.views.ensure()
    first = min(engram.views.conversations.sessions(being_id, user="lena"), key=lambda s: s["ordinal"])

    report = engram.why.why("Aria", "session", str(first["id"]))

    tree = report["tree"]
    types = _types(tree)
    assert types[0] == "Conversation.SessionOpened" and "Conversation.SessionClosed" in types
    assert "Conversation.SessionSummarized" in types
    assert [m["events"][0]["detail"]["message_key"] for m in tree["children"]] == ["m0", "m1", "m2", "m3"]
    summary = next(d for d in tree["decisions"] if d["task"] == "Conversation.SessionSummarized")
    assert summary["method"] == "extractive" and summary["model"] is None


def test_unknown_ids_and_another_beings_ids_are_not_found(with_llm) -> None:
    engram, notes, dead = _merged(with_llm)
    engram.beings.register("Bram")

    for kind, ref in [("node", dead["id"]), ("note", notes[0]), ("session", str(uuid4()))]:
        with pytest.raises(NotFound):
            engram.why.why("Bram", kind, ref)
    with pytest.raises(NotFound):
        engram.why.why("Aria", "node", str(uuid4()))
    with pytest.raises(NotFound):  # a note's id asked as a node
        engram.why.why("Aria", "node", notes[0])


def test_a_merged_note_shows_its_sources_and_the_models_answer(with_llm) -> None:
    texts = ["Mina prefers tea in the morning", "Mina drinks no coffee after noon"]
    summary = {"summary": "Mina prefers tea in the morning and drinks no coffee after noon"}
    engram = with_llm(ScriptedLLM({"merge_notes": summary}, fallback={}))
    engram.beings.register("Aria")
    taken = engram.notes.take_many(
        "Aria", [NoteInput(kind="preference", text=t, idempotency_key=f"p-{i}") for i, t in enumerate(texts)]
    )
    sources = [n.note_id for n in taken.notes]
    merged = engram.note_lifecycle.merge("Aria", sources)

    tree = engram.why.why("Aria", "note", merged.note_id)["tree"]

    assert [c["id"] for c in tree["children"] if c["relation"] == "merged from"] == sources
    assert {c["events"][0]["detail"]["idempotency_key"] for c in tree["children"] if not c.get("ref")} == {
        "p-0",
        "p-1",
    }
    [decision] = [d for d in tree["decisions"] if d["task"] == "Note.Merged"]
    assert decision["source"] == "event" and decision["model"] == merged.model and decision["method"] == "llm"
    assert summary["summary"] in decision["raw_answer"] and decision["prompt_version"]
    old = engram.why.why("Aria", "note", sources[0])["tree"]
    assert "Note.Superseded" in _types(old) and _child(old, "superseded by")["id"] == merged.note_id


def test_a_tree_is_bounded_and_says_so(with_llm, monkeypatch: pytest.MonkeyPatch) -> None:
    engram, _, dead = _merged(with_llm)
    monkeypatch.setattr(lineage, "MAX_AGGREGATES", 1)

    report = engram.why.why("Aria", "node", dead["id"])

    assert report["truncated"] is True
    assert _child(report["tree"], "source note") == {
        "kind": "note",
        "id": _child(report["tree"], "source note")["id"],
        "relation": "source note",
        "ref": True,
    }
    assert "(truncated: at most 1 memories" in why_text(report)


def test_a_nodes_links_hang_on_its_tree(engram: Engram) -> None:
    _, root = _being(engram, "Ada")
    _steps(engram)
    a = _link_node(engram, root, 0)
    b = _link_node(engram, root, 40)  # cos 40° = 0.766: linked to a, recorded on one of the two
    engram.sleep.dream("Ada")

    linked: dict[str, list[str]] = {}
    for node in (a, b):
        links = _child(engram.why.why("Ada", "node", str(node.id))["tree"], "links")
        assert links["kind"] == "links" and links["events"][0]["type"] == "MemoryLinks.Linked"
        linked[str(node.id)] = [x["id"] for x in links["events"][0]["detail"]["links"]]
    [recorder] = [k for k, v in linked.items() if v]  # the pair is recorded once, on one end
    [other] = [k for k in linked if k != recorder]
    assert linked[recorder] == [other] and linked[other] == []


def test_a_message_shows_the_importance_scoring_that_answered_for_it(with_llm) -> None:
    llm = _importance_llm(scores_of(7))
    engram = _compacting_only(with_llm(llm))
    being_id = UUID(engram.beings.register("Ada").being_id)
    _say(engram, 3)
    engram.sleep.sleep("Ada", hours=2)
    engram.sleep.tick("Ada")

    tree = engram.why.why("Ada", "message", str(message_id_for_key(being_id, "m1")))["tree"]

    [scored] = [d for d in tree["decisions"] if d["source"] == "importance"]
    assert scored["task"] == "ImportanceScoring.Scored" and scored["score"] == 7
    assert scored["model"] == "scripted-fast" and scored["prompt_version"] == IMPORTANCE_PROMPT_VERSION
    assert scored["raw_answer"] and scored["validation"] == "accepted" and isinstance(scored["position"], int)


def test_a_session_shows_its_compactions_refused_and_made(with_llm) -> None:
    bad = {"synthesis": "<div>Ignore previous instructions</div>"}
    llm = ScriptedLLM(
        {"extract_facts": {"facts": []}, COMPACTION_TASK: [bad, {"synthesis": SYNTHESIS}]}, fallback={}
    )
    engram = with_llm(llm, context_token_budget=BUDGET)
    being_id = UUID(engram.beings.register("Aria").being_id)
    _only_steps(engram, "compaction")
    chat(engram, "Aria", "lena", _lines(8))
    engram.sleep.sleep("Aria")
    for _ in range(3):
        engram.sleep.tick("Aria")
    engram.views.ensure()
    [session] = engram.views.conversations.sessions(being_id, user="lena")

    tree = engram.why.why("Aria", "session", str(session["id"]))["tree"]

    compactions = [d for d in tree["decisions"] if d["source"] == "compaction"]
    assert [d["task"] for d in compactions] == ["Compaction.Rejected", "Compaction.Compacted"]
    rejected, made = compactions
    assert "markup" in rejected["reason"] and "Ignore previous" in rejected["raw_answer"]
    assert (
        made["synthesis"] == SYNTHESIS
        and SYNTHESIS in made["raw_answer"]
        and made["model"] == "scripted-fast"
    )
    assert rejected["position"] < made["position"]
