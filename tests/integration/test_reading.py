"""Reading memory (spec "Recall Flow", `search_memory`, "Context Structure"), on SQLite and PostgreSQL.

Scenes are noted, a patrol turns them into nodes (hashing embedder: lexical, deterministic, recall
threshold 0.20), then each read is checked against the spec: what it returns, and what it writes
(reactivations: +1, or +2 for dead nodes reached by `recall_memory` / `search_memory`).
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from engram.domain.being import Being
from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound
from engram.services.reading import SNAPSHOT_ACKNOWLEDGED, Reading
from engram.services.thresholds import thresholds_for
from tests.patrol_support import note_scenes, scene

PLANTED = "Planted tomatoes in the garden with Mina"
WATERED = "Watered the tomato seedlings in the garden"
HARVESTED = "Harvested the first ripe tomatoes from the garden"
BASIL = "Picked basil in the garden for a pesto"
FAUCET = "Fixed the leaking bathroom faucet"
CLIMBED = "Climbed the north face with Lena"
MARATHON = "Ran the half marathon with Lena"
ROWED = "Über den Fluss gerudert"

SCENES = [
    scene(PLANTED, "2026-05-02", feeling="hopeful", themes=["garden"]),
    scene(WATERED, "2026-05-06", feeling="calm", themes=["garden"]),
    scene(HARVESTED, "2026-07-20", feeling="proud", themes=["garden"]),
    scene(BASIL, "2026-07-22", feeling="content", themes=["garden"]),
    scene(FAUCET, "2026-05-04", feeling="annoyed", themes=["work"]),
    scene(CLIMBED, "2026-05-03", feeling="scared but proud", themes=["climbing"]),
    scene(
        MARATHON,
        ["2026-04-12", {"date": "Day7", "action": "Hashiに正式決定"}],
        feeling="exhausted",
        themes=["Running"],
    ),
    scene(ROWED, "2026-06-01", feeling="glücklich"),
]
FEELING = {PLANTED: "hopeful", WATERED: "calm", HARVESTED: "proud", BASIL: "content"}


def prepare(engram: Any, name: str = "Aria", scenes: list[str] = SCENES) -> tuple[UUID, dict[str, str]]:
    """Register `name`, note the scenes, patrol: returns the being id and node ids by action."""
    being_id = UUID(engram.beings.register(name).being_id)
    note_scenes(engram, name, scenes)
    engram.patrol(name)
    engram.views.ensure()
    nodes = {r["action"]: r["id"] for r in engram.views.read.nodes(being_id)}
    assert len(nodes) == len(scenes)
    return being_id, nodes


def node_row(engram: Any, being_id: UUID, node_id: str) -> dict[str, Any]:
    engram.views.ensure()
    row = engram.views.read.node(being_id, UUID(node_id))
    assert row is not None
    return row  # type: ignore[no-any-return]


def counts(engram: Any, being_id: UUID) -> dict[str, int]:
    engram.views.ensure()
    return {r["id"]: r["reactivation_count"] for r in engram.views.read.nodes(being_id)}


def set_status(engram: Any, being_id: UUID, node_id: str, status: str) -> None:
    """Make a node dying (or dead) through the domain, as patrol would at a late cycle."""
    node = engram.store.get(MemoryNode, UUID(node_id), being_id=being_id)
    at = engram.clock.now()
    node.flag_dying(10_000, at)
    if status == "dead":
        node.make_dead(10_000, "test", at)
    engram.store.save(node)


def scores(engram: Any, being_id: UUID, text: str) -> list[tuple[str, float]]:
    """Every live node's cosine with `text`, best first, straight from the vector index."""
    [embedding] = engram.embedder.embed([text])
    vector = np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)
    hits = engram.views.vectors.similar_nodes(
        being_id, embedding.model, vector, 100, statuses=["active", "dying"]
    )
    return [(str(i), s) for i, s in hits]


def fisher_yates(items: list[str], seed: int) -> list[str]:
    """The reference shuffle: for i from n−1 down to 1, swap item i with item randint(0, i)."""
    rng, out = random.Random(seed), list(items)
    for i in range(len(out) - 1, 0, -1):
        j = rng.randint(0, i)
        out[i], out[j] = out[j], out[i]
    return out


# -- recall ----------------------------------------------------------------------------------------


def test_recall_returns_at_most_three_nodes_above_the_threshold(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    threshold = thresholds_for(engram.embedder.model_id).recall
    for text, expected_count in (("tomatoes in the garden", 3), ("tomato seedlings", 1)):
        ranked = scores(engram, being_id, text)
        above = [i for i, s in ranked if s > threshold]
        # The scenario exercises both cuts: more than 3 above the threshold, or some below it.
        assert len(above) > 3 or any(0 < s <= threshold for _, s in ranked)
        result = engram.reading.recall("Aria", text)
        assert [n.id for n in result.nodes] == above[:3]
        assert len(result.nodes) == expected_count
        assert all(n.score is not None and n.score > threshold for n in result.nodes)
    assert [n.id for n in engram.reading.recall("Aria", "tomato seedlings").nodes] == [ids[WATERED]]


def test_recall_reactivates_each_returned_node_once(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    before = counts(engram, being_id)
    result = engram.reading.recall("Aria", "tomatoes in the garden")
    returned = {n.id for n in result.nodes}
    assert returned == {ids[PLANTED], ids[WATERED], ids[HARVESTED]}
    after = counts(engram, being_id)
    assert {i: after[i] - before[i] for i in after} == {i: int(i in returned) for i in after}
    # the result shows each node as the recall left it, its count after the increment (item 8)
    assert [n.reactivation_count for n in result.nodes] == [after[n.id] for n in result.nodes] == [1, 1, 1]
    again = engram.reading.recall("Aria", "tomatoes in the garden")
    assert [n.reactivation_count for n in again.nodes] == [2, 2, 2]
    assert [n.reactivation_count for n in again.nodes] == [
        counts(engram, being_id)[n.id] for n in again.nodes
    ]
    before, after = after, counts(engram, being_id)
    cycle = engram.store.get(Being, being_id).cycle
    for node_id in returned:
        node = engram.store.get(MemoryNode, UUID(node_id), being_id=being_id)
        last = engram.store.events(UUID(node_id))[-1]
        assert type(last).__name__ == "Reactivated" and last.increment == 1 and last.source == "recall"
        assert node.reactivation_count == 2
        assert [n.last_activated_at for n in again.nodes if n.id == node_id] == [last.timestamp.isoformat()]
        assert node.last_activated_cycle == cycle == 1
        assert node.last_activated_at == last.timestamp
        row = node_row(engram, being_id, node_id)
        assert row["last_activated_at"] == last.timestamp.isoformat()
        assert row["last_activated_cycle"] == cycle
    assert again.position == engram.store.head()


def test_recall_fragments_are_a_seeded_fisher_yates_shuffle(engram: Engram) -> None:
    prepare(engram)
    result = Reading(engram, rng=random.Random(2026)).recall("Aria", "tomatoes in the garden")
    assert [n.action for n in result.nodes] == [PLANTED, WATERED, HARVESTED]  # best first
    parts = [p for n in result.nodes for p in (n.action, n.feeling)]
    assert parts == [PLANTED, "hopeful", WATERED, "calm", HARVESTED, "proud"]
    # Python's Random(2026) draws j = 4, 4, 1, 1, 0 for i = 5..1: positions [4, 1, 3, 5, 2, 0].
    expected = [parts[i] for i in (4, 1, 3, 5, 2, 0)]
    assert fisher_yates(parts, 2026) == expected
    assert result.text == "<memory>" + " / ".join(expected) + "</memory>"
    again = Reading(engram, rng=random.Random(2026)).recall("Aria", "tomatoes in the garden")
    assert again.text == result.text
    other = Reading(engram, rng=random.Random(7)).recall("Aria", "tomatoes in the garden")
    assert other.text == "<memory>" + " / ".join(fisher_yates(parts, 7)) + "</memory>" != result.text


def test_recall_without_a_match_is_empty_and_writes_nothing(engram: Engram) -> None:
    prepare(engram)
    head = engram.store.head()
    result = engram.reading.recall("Aria", "xylophone quartz zeppelin")
    assert result.text == "" and "<memory>" not in result.text
    assert result.nodes == [] and result.position is None
    assert engram.store.head() == head
    with pytest.raises(InvalidInput):
        engram.reading.recall("Aria", "   ")


def test_recall_skips_dead_nodes_and_revives_dying_ones(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    set_status(engram, being_id, ids[PLANTED], "dead")
    set_status(engram, being_id, ids[WATERED], "dying")
    result = engram.reading.recall("Aria", "tomatoes in the garden")
    assert ids[PLANTED] not in {n.id for n in result.nodes}
    assert ids[WATERED] in {n.id for n in result.nodes}
    assert node_row(engram, being_id, ids[WATERED])["status"] == "active"  # ADR 0004


# -- recall_memory ---------------------------------------------------------------------------------


def test_recall_memory_adds_one_to_live_nodes_and_two_to_dead_ones(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    cluster_id = node_row(engram, being_id, ids[PLANTED])["cluster_id"]
    members = {r["id"] for r in engram.views.read.nodes(being_id, cluster_id=UUID(cluster_id))}
    assert {ids[PLANTED], ids[WATERED], ids[HARVESTED]} <= members
    set_status(engram, being_id, ids[PLANTED], "dead")
    set_status(engram, being_id, ids[WATERED], "dying")
    before = counts(engram, being_id)
    result = engram.reading.recall_memory("Aria", UUID(cluster_id))
    assert {n.id for n in result.nodes} == members
    after = counts(engram, being_id)
    expected = {i: (2 if i == ids[PLANTED] else 1) if i in members else 0 for i in after}
    assert {i: after[i] - before[i] for i in after} == expected
    assert {n.id: n.reactivation_count for n in result.nodes} == {i: after[i] for i in members}
    assert {n.id: n.status for n in result.nodes}[ids[WATERED]] == "active"  # as the read left it
    assert node_row(engram, being_id, ids[PLANTED])["status"] == "dead"  # revived by ❺, not by the read
    assert node_row(engram, being_id, ids[WATERED])["status"] == "active"
    with pytest.raises(NotFound):
        engram.reading.recall_memory("Aria", UUID(int=12345))


# -- search_memory ---------------------------------------------------------------------------------


def _search(engram: Any, *terms: str, mode: str = "or") -> set[str]:
    return {n.action for n in engram.reading.search_memory("Aria", list(terms), mode=mode).nodes}


def test_search_memory_fields_and_semantics(engram: Engram) -> None:
    prepare(engram)
    # substring of the action, case-insensitive
    assert _search(engram, "tomat") == {PLANTED, WATERED, HARVESTED}
    assert _search(engram, "FAUCET") == {FAUCET}
    # substring of the feeling
    assert _search(engram, "hopef") == {PLANTED}
    assert _search(engram, "proud") == {HARVESTED, CLIMBED}
    # the JSON text of `when`: plain dates and {date, action} entries
    assert _search(engram, "2026-05-0") == {PLANTED, WATERED, FAUCET, CLIMBED}
    assert _search(engram, "Day7") == _search(engram, "day7") == {MARATHON}
    assert _search(engram, "Hashi") == _search(engram, "正式決定") == {MARATHON}
    # themes: element equality (case-insensitive), not substring
    assert _search(engram, "work") == {FAUCET}
    assert _search(engram, "wor") == set()
    assert _search(engram, "running") == _search(engram, "Running") == {MARATHON}
    assert _search(engram, "runnin") == set()
    # letters beyond ASCII fold too, on both backends
    assert _search(engram, "über") == _search(engram, "ÜBER") == _search(engram, "Über") == {ROWED}
    assert _search(engram, "GLÜCKLICH") == {ROWED}
    # LIKE / GLOB wildcards in a term are plain characters
    assert _search(engram, "%") == _search(engram, "_") == _search(engram, "*") == set()
    # or (default): any term; and: every term, each in any field
    assert _search(engram, "faucet", "basil") == {FAUCET, BASIL}
    assert _search(engram, "faucet", "basil", mode="and") == set()
    assert _search(engram, "tomatoes", "hopeful", mode="and") == {PLANTED}
    assert _search(engram, "lena", "day7", mode="and") == {MARATHON}
    # a list item is one term, spaces included; a string is split on whitespace
    assert _search(engram, "half marathon") == {MARATHON}
    found = engram.reading.search_memory("Aria", "basil faucet")
    assert {n.action for n in found.nodes} == {FAUCET, BASIL}
    with pytest.raises(InvalidInput):
        engram.reading.search_memory("Aria", [])
    with pytest.raises(InvalidInput):
        engram.reading.search_memory("Aria", ["x"], mode="xor")


def test_search_memory_adds_one_to_live_nodes_and_two_to_dead_ones(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    set_status(engram, being_id, ids[PLANTED], "dead")
    before = counts(engram, being_id)
    found = engram.reading.search_memory("Aria", ["garden"])
    assert {n.action for n in found.nodes} == {PLANTED, WATERED, HARVESTED, BASIL}
    after = counts(engram, being_id)
    garden = {ids[a] for a in (WATERED, HARVESTED, BASIL)}
    expected = {i: 2 if i == ids[PLANTED] else int(i in garden) for i in after}
    assert {i: after[i] - before[i] for i in after} == expected
    last = engram.store.events(UUID(ids[PLANTED]))[-1]
    assert last.source == "search_memory" and last.increment == 2
    assert {n.id: n.reactivation_count for n in found.nodes} == {n.id: after[n.id] for n in found.nodes}


WEEDED = [f"Weeded garden bed {i}" for i in range(130)]  # more matches than the old cap (100)


def test_search_memory_reactivates_every_match_in_one_command_and_pages_the_rest(engram: Engram) -> None:
    being_id, ids = prepare(engram, scenes=[*SCENES, *(scene(a, "2026-06-01") for a in WEEDED)])
    matching = {i for action, i in ids.items() if "garden" in action}
    dead = {ids[PLANTED], ids[WEEDED[7]]}
    assert len(matching) == 134
    for node_id in dead:
        set_status(engram, being_id, node_id, "dead")
    before, head = counts(engram, being_id), engram.store.head()

    first = engram.reading.search_memory("Aria", ["garden"], limit=50)
    assert (first.total, first.reactivated, len(first.nodes)) == (134, 134, 50)
    after = counts(engram, being_id)
    expected = {i: (2 if i in dead else 1) if i in matching else 0 for i in after}
    assert {i: after[i] - before[i] for i in after} == expected
    # one command: 134 events and nothing else, all stamped with the command's one instant
    written = engram.audit.log(being="Aria", after=head, limit=1000)
    assert len(written) == 134 and first.position == engram.store.head()
    last = [engram.store.events(UUID(i))[-1] for i in matching]
    assert {e.source for e in last} == {"search_memory"} and len({e.timestamp for e in last}) == 1
    assert all(n.reactivation_count == after[n.id] for n in first.nodes)

    # The next pages: a read in between changes which nodes were activated last, not the pages,
    # and the pages reactivate nothing more.
    engram.reading.recall("Aria", "weeded garden bed 3")
    between = counts(engram, being_id)
    seen, sizes, cursor = [n.id for n in first.nodes], [50], first.cursor
    while cursor is not None:
        page = engram.reading.search_memory("Aria", ["garden"], limit=50, cursor=cursor)
        assert (page.total, page.reactivated, page.position) == (134, 0, None)
        seen += [n.id for n in page.nodes]
        sizes.append(len(page.nodes))
        cursor = page.cursor
    assert sizes == [50, 50, 34] and counts(engram, being_id) == between
    assert len(seen) == len(set(seen)) and set(seen) == matching
    seq = {r["id"]: r["seq"] for r in engram.views.read.nodes(being_id)}
    assert [seq[i] for i in seen] == sorted((seq[i] for i in matching), reverse=True)  # newest first

    with pytest.raises(InvalidInput, match="another search"):
        engram.reading.search_memory("Aria", ["tomat"], cursor=first.cursor)
    with pytest.raises(InvalidInput, match="another search"):
        engram.reading.search_memory("Aria", ["garden"], mode="and", cursor=first.cursor)
    for bad in ("nonsense!", "x" * 201, "MTI"):
        with pytest.raises(InvalidInput, match="cursor"):
            engram.reading.search_memory("Aria", ["garden"], cursor=bad)
    for limit in (0, 101):
        with pytest.raises(InvalidInput, match="limit"):
            engram.reading.search_memory("Aria", ["garden"], limit=limit)
    nothing = engram.reading.search_memory("Aria", ["xylophone"])
    assert (nothing.nodes, nothing.total, nothing.cursor, nothing.position) == ([], 0, None, None)


# -- query -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["default", "spec-001"])
def test_query_fuses_semantic_and_lexical(engram: Engram, profile: str) -> None:
    being_id, ids = prepare(engram)
    # A lexical query: the semantic channel alone ranks the wrong node first; the full-text index
    # finds "climbing" (stemmed), and the fusion puts the climbing scene first.
    semantic_only = engram.reading.query(
        "Aria", "mountain climbing", profile_name="semantic", reactivate=False
    )
    assert semantic_only.nodes[0].action != CLIMBED
    lexical = engram.views.search.lexical(being_id, "mountain climbing", 10)
    assert [i for i, _ in lexical] == [ids[CLIMBED]]
    fused = engram.reading.query("Aria", "mountain climbing", profile_name=profile, reactivate=False)
    assert fused.nodes[0].action == CLIMBED
    # A paraphrase with no word in common: the full-text index finds nothing, the vectors carry it.
    assert engram.views.search.lexical(being_id, "a leaky faucett", 10) == []
    fused = engram.reading.query("Aria", "a leaky faucett", profile_name=profile, reactivate=False)
    assert fused.nodes[0].action == FAUCET
    scored = [n.score for n in fused.nodes]
    assert all(s is not None for s in scored) and scored == sorted(scored, reverse=True)  # type: ignore[type-var]


def test_query_reactivates_unless_told_not_to(engram: Engram) -> None:
    being_id, _ = prepare(engram)
    head = engram.store.head()
    before = counts(engram, being_id)
    result = engram.reading.query("Aria", "basil pesto", k=2, reactivate=False)
    assert result.nodes[0].action == BASIL and len(result.nodes) == 2
    assert result.position is None and engram.store.head() == head
    assert counts(engram, being_id) == before
    result = engram.reading.query("Aria", "basil pesto", k=2)
    assert engram.store.head() > head and result.position == engram.store.head()
    after = counts(engram, being_id)
    returned = {n.id for n in result.nodes}
    assert {i: after[i] - before[i] for i in after} == {i: int(i in returned) for i in after}
    assert all(n.reactivation_count == after[n.id] for n in result.nodes)


def test_query_dead_nodes_only_on_request(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    set_status(engram, being_id, ids[BASIL], "dead")
    live = engram.reading.query("Aria", "basil pesto", k=20, reactivate=False)
    assert ids[BASIL] not in {n.id for n in live.nodes}
    assert {n.status for n in live.nodes} <= {"active", "dying"}
    with_dead = engram.reading.query("Aria", "basil pesto", k=20, include_dead=True, reactivate=False)
    assert with_dead.nodes[0].id == ids[BASIL] and with_dead.nodes[0].status == "dead"


def test_query_bounds_and_profiles(engram: Engram) -> None:
    prepare(engram)
    for profile in ("default", "spec-001", "semantic", "lexical"):
        found = engram.reading.query("Aria", "basil pesto", profile_name=profile, reactivate=False)
        assert found.nodes[0].action == BASIL, profile
    assert len(engram.reading.query("Aria", "garden", k=1, reactivate=False).nodes) == 1
    assert len(engram.reading.query("Aria", "garden", k=100, reactivate=False).nodes) <= len(SCENES)
    for bad in ({"k": 0}, {"k": 101}, {"profile_name": "nope"}):
        with pytest.raises(InvalidInput):
            engram.reading.query("Aria", "garden", reactivate=False, **bad)
    with pytest.raises(InvalidInput):
        engram.reading.query("Aria", " ", reactivate=False)
    with pytest.raises(InvalidInput):
        engram.reading.query("Aria", "x" * 4001, reactivate=False)
    with pytest.raises(NotFound):
        engram.reading.query("Nobody", "garden")


# -- context ---------------------------------------------------------------------------------------

GREENHOUSE = json.dumps(
    {
        "action": "Repotted the lemon tree",
        "actors": ["me", "Mina"],
        "when": ["2026-04-30", "2026-05-01"],
        "setting": "In the greenhouse",
        "dialogue": ["Look, the first flower!", "It smells of summer."],
        "feeling": "delighted",
    }
)


def test_context_blocks(engram: Engram) -> None:
    from engram.services.commands import NoteInput

    being_id, ids = prepare(engram, scenes=[*SCENES, GREENHOUSE])
    engram.beings.define_soul("Aria", "Curious, warm, dry humour.")
    engram.beings.write_think_md("Aria", "- Mina loves lemons")
    take = engram.notes.take

    def note(kind: str, text: str) -> str:
        evidence = ["asked for it in chat"] if kind == "rule" else []  # a rule needs evidence
        return take("Aria", NoteInput(kind=kind, text=text, evidence=evidence)).note_id

    note("rule", "Answer in English")
    disabled = note("rule", "Never mention the weather")
    engram.notes.set_enabled("Aria", UUID(disabled), False)
    note("preference", "Likes short answers")
    note("relationship", "Mina is my neighbour")
    note("tool", "calendar: reads and books Mina's appointments")
    unused = note("tool", "fax: sends faxes")
    engram.notes.set_enabled("Aria", UUID(unused), False)
    note("map", "Greenhouse: behind the house, the lemon tree lives there")
    note("todo", "Renew the passport")
    done = note("todo", "Buy potting soil")
    engram.notes.mark_read("Aria", UUID(done))
    note("reminder", "Mina's birthday on Friday")
    note("knowledge", "Tomatoes need full sun")
    today = engram.clock.now().date()  # the stepping clock moves by seconds: still today below
    for days_ago in (0, 6, 7):
        date = (today - timedelta(days=days_ago)).isoformat()
        engram.beings.write_diary("Aria", date, f"diary {days_ago} days ago")
    # Reactivate six nodes in a known order; the dead one must not appear among the recent.
    order = [CLIMBED, FAUCET, "Repotted the lemon tree", BASIL, HARVESTED, WATERED, MARATHON]
    for action in order:
        engram.reading.search_memory("Aria", [action])
    set_status(engram, being_id, ids[MARATHON], "dead")

    view = engram.reading.context("Aria")
    assert view.being == "Aria"
    assert view.system_prompt == {
        "soul": "Curious, warm, dry humour.",
        "soul_notes": [],
        "summaries": [],
        "think_md": "- Mina loves lemons",
        "rules": ["Answer in English"],
        "preferences": ["Likes short answers"],
        "relationships": ["Mina is my neighbour"],
        "tools": ["calendar: reads and books Mina's appointments"],
        "map": ["Greenhouse: behind the house, the lemon tree lives there"],
    }
    # Block 1-A lists the partner's tools and map entries in their own sections, after the rules,
    # preferences and relationships (spec, "Context Structure").
    headings = [line for line in view.system_text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Rules you follow",
        "## Notes from your last reflection",
        "## Your preferences",
        "## Your relationships",
        "## Tools you can use",
        "## Your map",
    ]
    assert "- calendar: reads and books Mina's appointments\n\n## Your map\n- Greenhouse" in view.system_text
    assert "fax" not in view.text
    # Block 1-B: a user + assistant prefix pair, the snapshot rendered and acknowledged.
    assert [m.role for m in view.messages] == ["user", "assistant"]
    snapshot_text = view.messages[0].content
    assert snapshot_text.startswith("# What is on your plate\n## Unread to-dos and reminders")
    assert "- [todo] Renew the passport" in snapshot_text and "- Tomatoes need full sun" in snapshot_text
    assert "diary 6 days ago" in snapshot_text and "Rules you follow" not in snapshot_text
    assert view.messages[1].content == SNAPSHOT_ACKNOWLEDGED
    assert view.recent_text.startswith("# Recent memories\n- ")
    assert view.text == f"{view.system_text}\n\n{snapshot_text}\n\n{view.recent_text}"
    assert [(n["kind"], n["text"]) for n in view.snapshot["unread"]] == [
        ("todo", "Renew the passport"),
        ("reminder", "Mina's birthday on Friday"),
    ]
    assert view.snapshot["knowledge"] == ["Tomatoes need full sun"]
    assert [d["text"] for d in view.snapshot["diary"]] == ["diary 6 days ago", "diary 0 days ago"]
    recent = [n["text"] for n in view.recent_nodes]
    assert recent == [
        "2026-05-06 — Watered the tomato seedlings in the garden — (calm)",
        "2026-07-20 — Harvested the first ripe tomatoes from the garden — (proud)",
        "2026-07-22 — Picked basil in the garden for a pesto — (content)",
        '2026-04-30 — In the greenhouse — Repotted the lemon tree — "Look, the first flower!" — (delighted)',
        "2026-05-04 — Fixed the leaking bathroom faucet — (annoyed)",
    ]
    for block in (
        "Curious, warm, dry humour.",
        "- Answer in English",
        "[todo] Renew the passport",
        "Tomatoes need full sun",
        "diary 6 days ago",
        recent[3],
    ):
        assert block in view.text
    for absent in ("Never mention the weather", "Buy potting soil", "diary 7 days ago", MARATHON):
        assert absent not in view.text


def test_tool_and_map_notes_go_to_the_system_prompt_and_never_become_memories(engram: Engram) -> None:
    from engram.services.commands import NoteInput

    being_id = UUID(engram.beings.register("Aria").being_id)
    empty = engram.reading.context("Aria")
    assert empty.system_prompt["tools"] == empty.system_prompt["map"] == []
    assert empty.messages[0].content == (
        "# What is on your plate\nNothing: no unread to-do or reminder, no knowledge, no diary in the last 7 days."
    )
    taken = engram.notes.take_many(
        "Aria",
        [
            NoteInput(kind="tool", text="calendar: books appointments"),
            NoteInput(kind="map", text="Greenhouse: behind the house"),
            NoteInput(text=scene(FAUCET, "2026-05-04")),
        ],
    )
    assert [(t.kind, t.parsed) for t in taken.notes] == [("tool", None), ("map", None), ("scene", True)]
    engram.patrol("Aria")
    engram.views.ensure()
    assert [r["action"] for r in engram.views.read.nodes(being_id)] == [FAUCET]
    kinds = {n["kind"]: n["parse_status"] for n in engram.views.read.notes(being_id)}
    assert kinds == {"tool": "not_applicable", "map": "not_applicable", "scene": "processed"}
    view = engram.reading.context("Aria")
    assert view.system_prompt["tools"] == ["calendar: books appointments"]
    assert view.system_prompt["map"] == ["Greenhouse: behind the house"]
    assert "behind the house" not in view.messages[0].content and "calendar" not in view.recent_text


# -- tenancy ---------------------------------------------------------------------------------------


def test_reads_never_cross_beings(engram: Engram) -> None:
    _, a_nodes = prepare(engram, "A")
    b_id, b_nodes = prepare(engram, "B")  # identical texts
    b_ids = set(b_nodes.values())
    assert not b_ids & set(a_nodes.values())
    reads = [
        engram.reading.recall("A", "tomatoes in the garden").nodes,
        engram.reading.query("A", "tomatoes in the garden", k=100, include_dead=True).nodes,
        engram.reading.search_memory("A", ["garden", "Lena", "faucet", "Day7"]).nodes,
    ]
    for nodes in reads:
        assert nodes and {n.id for n in nodes} <= set(a_nodes.values())
    b_cluster = node_row(engram, b_id, b_nodes[PLANTED])["cluster_id"]
    with pytest.raises(NotFound):
        engram.reading.recall_memory("A", UUID(b_cluster))
    assert all(v == 0 for v in counts(engram, b_id).values())  # nothing of B was reactivated


# -- fixes in the read models (each test fails without its fix) -------------------------------------


def test_lexical_ignores_stop_words_on_both_backends(engram: Engram) -> None:
    being_id, ids = prepare(engram)
    # SQLite's index used to rank every node containing "the"; PostgreSQL's english config drops it.
    assert engram.views.search.lexical(being_id, "the", 10) == []
    found = engram.views.search.lexical(being_id, "the leaking faucet", 10)
    assert [i for i, _ in found] == [ids[FAUCET]]


def test_recall_with_a_precomputed_vector_matches_recall(engram: Engram) -> None:
    prepare(engram)
    [embedding] = engram.embedder.embed(["tomatoes in the garden"])
    vector = np.frombuffer(embedding.data, dtype="<f4").astype(np.float32)
    given = Reading(engram, rng=random.Random(1)).recall("Aria", "tomatoes in the garden", vector=vector)
    plain = Reading(engram, rng=random.Random(1)).recall("Aria", "tomatoes in the garden")
    assert given.text == plain.text and [n.id for n in given.nodes] == [n.id for n in plain.nodes]


def test_lookups_by_id_use_the_primary_key_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without statistics SQLite chose the (being_id, …) index for `being_id = ? AND id IN (…)`, scanning
    all of a being's nodes for each lookup (recall, query, patrol)."""
    import sqlite3

    from engram.adapters.views import sqlite_db
    from engram.services.bootstrap import bootstrap
    from engram.services.config import Settings

    with bootstrap(Settings(data_dir=tmp_path / "d", embedder="hashing", llm="none")) as e:
        being_id, ids = prepare(e)
        statements: list[tuple[str, list[Any]]] = []
        original = sqlite_db._Conn.query

        def spy(self: Any, sql: str, params: Any = ()) -> list[dict[str, Any]]:
            statements.append((sql, list(params)))
            return original(self, sql, params)

        # A page of candidates, as `query` fetches (with a few ids SQLite may still pick the key).
        many = [UUID(i) for i in ids.values()] + [UUID(int=n) for n in range(1, 193)]
        monkeypatch.setattr(sqlite_db._Conn, "query", spy)
        assert len(e.views.read.nodes(being_id, ids=many)) == len(ids)
        assert len(e.views.read.node_vectors(being_id, many)) == len(ids)
        monkeypatch.undo()
        lookups = [(sql, p) for sql, p in statements if " id IN (" in sql]
        assert len(lookups) == 2
        for (sql, params), view in zip(lookups, ("memory", "vectors"), strict=True):
            with sqlite3.connect(e.settings.data_dir / "views" / f"{view}.sqlite3") as conn:
                plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            assert "(id=?)" in plan and "being_id=?" not in plan, plan


def test_a_snapshot_reads_one_state_in_one_transaction(engram: Engram) -> None:
    """`ReadModels.snapshot` (what `query` ranks in): every read inside sees the views as they were
    when it began, on both backends, even while another thread writes and catches the views up."""
    import threading

    being_id, nodes = prepare(engram)
    read = engram.views.read
    ids = [UUID(i) for i in nodes.values()]
    before = read.nodes(being_id, ids=ids)
    with read.snapshot("memory") as snapshot:
        first = snapshot.nodes(being_id, ids=ids)

        def write() -> None:  # another thread: its own view connections
            set_status(engram, being_id, nodes[FAUCET], "dead")
            engram.views.ensure()

        worker = threading.Thread(target=write)
        worker.start()
        worker.join()
        assert snapshot.nodes(being_id, ids=ids) == first == before
        assert snapshot.node(being_id, UUID(nodes[FAUCET]))["status"] == "active"  # type: ignore[index]
    assert engram.views.read.node(being_id, UUID(nodes[FAUCET]))["status"] == "dead"  # type: ignore[index]
