"""The explorer's node, cluster, note and fact pages (issue #14, ADR 0086) without a browser, on both
backends: state now and as of a version or an instant, the timeline with the diff each event made,
the verbatim LLM decisions (escaped), the lineage SVG, links between pages, 404 and 403 pages."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.adapters.ui.lineage_svg import lineage_svg
from engram.domain.errors import InvalidInput
from engram.services.bootstrap import Engram
from engram.services.commands import FactInput
from engram.services.item_history import changes, cluster_nodes, timeline
from engram.services.tokens import TokenService
from tests.patrol_support import Call, ScriptedLLM, note_scenes, scene
from tests.session_support import chat

PLANTED = "<script>window.__pwned=1</script>"


def _merge_with_planted_reason(call: Call) -> dict[str, Any]:
    """The first memory absorbs the second, for a reason holding markup (shown verbatim, escaped)."""
    live = [m for m in call.memories if not m.pinned and not m.dying]
    if len(live) < 2:
        return {"merges": [], "make_dead": []}
    return {
        "merges": [{"survivor": live[0].id, "absorbed": [live[1].id], "reason": f"{PLANTED} same walk"}],
        "make_dead": [],
    }


@dataclass
class Ui:
    client: TestClient
    engram: Engram
    being_id: UUID
    tokens: dict[str, str]
    notes: list[str]
    dead: dict[str, Any]

    def get(self, path: str, who: str = "admin") -> Any:
        return self.client.get(path, headers={"Authorization": f"Bearer {self.tokens[who]}"})

    def url(self, plural: str, item_id: str) -> str:
        return f"/ui/beings/{self.being_id}/{plural}/{item_id}"


@pytest.fixture
def ui(with_llm: Callable[..., Engram]) -> Iterator[Ui]:
    answer = {"facts": [{"fact": "Lena works as a nurse at the city hospital", "type": "profile"}]}
    llm = ScriptedLLM({"consolidate_cluster": _merge_with_planted_reason, "extract_facts": answer})
    engram = with_llm(llm)
    being_id = UUID(engram.beings.register("Aria").being_id)
    engram.beings.register("Bruno")
    notes = note_scenes(
        engram,
        "Aria",
        [
            scene(f"{PLANTED} walked the dog", "2021-01-03"),
            scene("Walked the dog, then painted", "2022-02-14"),
        ],
        prefix="k",
    )
    engram.patrol("Aria")
    engram.views.ensure()
    [dead] = engram.views.read.nodes(being_id, statuses=["dead"])
    service = TokenService(engram)
    tokens = {
        "admin": service.issue(admin=True).token,
        "Aria": service.issue(being="Aria").token,
        "Bruno": service.issue(being="Bruno").token,
    }
    app = create_app(engram, settings=HttpSettings(token_refresh_s=0.001), warm_up=False)
    with TestClient(app, follow_redirects=False) as client:
        yield Ui(client, engram, being_id, tokens, notes, dead)


def _section(html: str, name: str) -> str:
    found = re.search(rf'<section[^>]*id="{name}"[^>]*>(.*?)</section>', html, re.S)
    assert found, f"no section {name}"
    return found.group(1)


def test_a_node_page_shows_its_state_its_timeline_with_diffs_and_the_llm_decision(ui: Ui) -> None:
    page = ui.get(ui.url("nodes", ui.dead["id"]))

    assert page.status_code == 200, page.text
    html = page.text
    assert 'class="field-status">\ndead' in html
    timeline_html = _section(html, "timeline")
    assert (
        '<td class="num">@' in timeline_html and "created" in timeline_html and ">absorbed<" in timeline_html
    )
    # The absorption's diff: status active → dead, and where it went.
    assert '<span class="field">status</span>:\n<del>active</del> → <ins>dead</ins>' in timeline_html
    assert '<span class="field">absorbed_into</span>' in timeline_html
    decisions = _section(html, "decisions")
    assert (
        "consolidate_cluster" in decisions and "scripted-reasoning" in decisions and "accepted" in decisions
    )
    # The model's answer verbatim, its markup escaped.
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt; same walk" in decisions
    assert PLANTED not in html
    # Links: its note, its cluster, the node that absorbed it.
    links = _section(html, "links")
    assert ui.url("notes", ui.dead["source_note_id"]) in links
    assert f"/ui/beings/{ui.being_id}/clusters/" in links and f"/ui/beings/{ui.being_id}/nodes/" in links


def test_the_lineage_is_an_svg_whose_boxes_link_to_their_pages(ui: Ui) -> None:
    html = ui.get(ui.url("nodes", ui.dead["id"])).text

    svg = _section(html, "lineage")
    assert '<svg class="lineage"' in svg and "</svg>" in svg
    assert f'<a href="{ui.url("notes", ui.dead["source_note_id"])}">' in svg
    assert "decision · consolidate_cluster" in svg and "absorbed into: node" in svg


def test_the_state_as_of_a_version_and_as_of_an_instant(ui: Ui) -> None:
    url = ui.url("nodes", ui.dead["id"])
    history = ui.engram.audit.history("node", ui.dead["id"])
    first = history[0]
    # The last event at or before the instant: the node was made and embedded in the same second.
    at_first = max(e["version"] for e in history if e["timestamp"] == first["timestamp"])

    old = ui.get(f"{url}?as_of=1").text
    assert "State as of version 1" in old and 'class="field-status">\nactive' in old
    assert 'name="as_of" min="1" max="3" value="1" data-autosubmit' in old
    assert '<tr class="shown" id="v1">' in old

    for instant in (first["timestamp"], first["timestamp"][:19]):  # with a zone, and as the picker sends it
        at = ui.get(f"{url}?as_of={instant.replace('+', '%2B')}").text
        assert f"State as of version {at_first}" in at and 'class="field-status">\nactive' in at

    now = ui.get(url).text
    assert "State now" in now and 'class="field-status">\ndead' in now


def test_bad_as_of_unknown_ids_and_another_beings_token_are_pages_not_tracebacks(ui: Ui) -> None:
    url = ui.url("nodes", ui.dead["id"])
    assert ui.get(f"{url}?as_of=99").status_code == 404
    bad = ui.get(f"{url}?as_of=yesterday")
    assert bad.status_code == 422 and "as_of takes a version number" in bad.text
    before = ui.get(f"{url}?as_of=2001-01-01T00:00:00Z")
    assert before.status_code == 404 and "did not exist yet" in before.text
    for plural in ("nodes", "clusters", "notes", "facts"):
        missing = ui.get(ui.url(plural, str(uuid4())))
        assert missing.status_code == 404 and "Not found" in missing.text
    assert ui.get(ui.url("nodes", "not-an-id")).status_code == 404
    # A note's id on the node page is not a node.
    assert ui.get(ui.url("nodes", ui.notes[0])).status_code == 404
    refused = ui.get(url, who="Bruno")
    assert refused.status_code == 403 and "another being" in refused.text
    assert ui.get(url, who="Aria").status_code == 200
    # Bruno's page, with Aria's node id: not Bruno's node.
    assert ui.get(f"/ui/beings/Bruno/nodes/{ui.dead['id']}").status_code == 404


def test_a_note_page_escapes_the_planted_script_and_links_its_node(ui: Ui) -> None:
    html = ui.get(ui.url("notes", ui.notes[0]), who="Aria").text

    assert "<script>window" not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "Note.Noted" in html or "noted" in _section(html, "timeline")
    links = _section(html, "links")
    assert f"/ui/beings/{ui.being_id}/nodes/" in links
    decisions = _section(html, "decisions")
    assert "classify_root" in decisions and "scripted-fast" in decisions


def test_a_sensitive_note_needs_an_admin_token(ui: Ui) -> None:
    from engram.services.commands import NoteInput

    [taken] = ui.engram.notes.take_many(
        "Aria", [NoteInput(text="The door code is 4321", kind="knowledge", sensitivity="sensitive")]
    ).notes
    secret = taken.note_id
    refused = ui.get(ui.url("notes", secret), who="Aria")
    assert refused.status_code == 403 and "sensitive" in refused.text
    assert ui.get(ui.url("notes", secret)).status_code == 200


def test_a_cluster_page_lists_its_nodes_a_page_at_a_time(ui: Ui) -> None:
    cluster_id = ui.dead["cluster_id"]
    html = ui.get(ui.url("clusters", cluster_id)).text

    listed = _section(html, "links")
    assert ui.url("nodes", ui.dead["id"]) in listed and 'id="cluster-nodes"' in listed
    assert "Next nodes" not in listed
    assert "decision · consolidate_cluster" in _section(html, "lineage")

    read = ui.engram.views.read
    args: dict[str, Any] = {"now": ui.engram.clock.now(), "include_sensitive": True, "limit": 1}
    first, key = cluster_nodes(read, ui.being_id, UUID(cluster_id), **args)
    assert len(first) == 1 and key is not None
    second, last = cluster_nodes(read, ui.being_id, UUID(cluster_id), after=key, **args)
    assert len(second) == 1 and last is None and second[0]["id"] != first[0]["id"]
    paged = ui.get(f"{ui.url('clusters', cluster_id)}?after={key}").text
    assert ui.url("nodes", str(second[0]["id"])) in _section(paged, "links")
    assert ui.url("nodes", str(first[0]["id"])) not in _section(paged, "links")


def test_a_fact_page_shows_its_revision_and_its_source_message(ui: Ui) -> None:
    stated = ui.engram.facts.state(
        "Aria", FactInput(text="Aria likes tea", subject="aria", memory_key="preference|person|aria|drink")
    )
    ui.engram.facts.state(
        "Aria", FactInput(text="Aria likes coffee", subject="aria", memory_key="preference|person|aria|drink")
    )
    html = ui.get(ui.url("facts", stated.fact_id), who="Aria").text
    assert "Aria likes coffee" in _section(html, "timeline")
    assert "<del>Aria likes tea</del> → <ins>Aria likes coffee</ins>" in html
    assert "Stated directly" in _section(html, "links")
    old = ui.get(f"{ui.url('facts', stated.fact_id)}?as_of=1", who="Aria").text
    assert 'class="field-text">\nAria likes tea' in old

    chat(ui.engram, "Aria", "lena", [("user", "Hi! I'm Lena, I work as a nurse at the city hospital.")])
    ui.engram.extraction.run_until_done("Aria")
    ui.engram.views.ensure()
    with ui.engram.views.read.reading("facts") as (conn, tables):
        rows = conn.query(f"SELECT id FROM {tables['facts']} WHERE owner_id = ?", [str(ui.being_id)])
    extracted = next(r for r in rows if str(r["id"]) != stated.fact_id)
    page = ui.get(ui.url("facts", str(extracted["id"])), who="Aria").text
    message = _section(page, "links")
    assert "I work as a nurse at the city hospital" in message and "key <code>m0</code>" in message

    # Its session's page: the messages, the conversation's events, 404 and 403 as elsewhere.
    found = re.search(r'href="(/ui/beings/[^"]+/sessions/([^"]+))">its session', message)
    assert found, message
    session = ui.get(found.group(1), who="Aria")
    assert session.status_code == 200 and "I work as a nurse" in _section(session.text, "messages")
    assert "session opened" in _section(session.text, "timeline")
    assert ui.get(found.group(1), who="Bruno").status_code == 403
    assert ui.get(ui.url("sessions", str(uuid4()))).status_code == 404
    assert ui.get(ui.url("sessions", "nope")).status_code == 404
    assert ui.get(f"{ui.url('clusters', str(ui.dead['cluster_id']))}?after=x").status_code == 422


def test_the_timeline_replays_once_a_page_at_a_time(ui: Ui) -> None:
    full = timeline(ui.engram.store, "node", ui.dead["id"], being="Aria")
    assert full["total"] == 3 and full["pages"] == 1 and [e["version"] for e in full["events"]] == [1, 2, 3]
    positions = [e["position"] for e in full["events"]]
    assert positions == sorted(positions) and all(isinstance(p, int) for p in positions)

    second = timeline(ui.engram.store, "node", ui.dead["id"], being="Aria", page=3, per_page=1)
    assert second["pages"] == 3 and [e["version"] for e in second["events"]] == [3]
    # The page's first event is diffed against the state before it, not against nothing.
    assert [c.name for c in second["events"][0]["changes"]] == [c.name for c in full["events"][2]["changes"]]
    with pytest.raises(InvalidInput):
        timeline(ui.engram.store, "node", ui.dead["id"], being="Aria", page=4, per_page=1)
    too_many = ui.get(f"{ui.url('nodes', ui.dead['id'])}?page=9")
    assert too_many.status_code == 422 and "page must be between 1 and 1" in too_many.text


def test_changes_are_the_fields_that_differ() -> None:
    found = changes(
        {"a": 1, "b": [1], "gone": 2, "version": 1}, {"a": 1, "b": [1, 2], "new": 3, "version": 2}
    )
    assert [(c.name, c.before, c.after) for c in found] == [
        ("b", [1], [1, 2]),
        ("new", None, 3),
        ("gone", 2, None),
    ]


def test_the_lineage_svg_escapes_every_text() -> None:
    tree = {
        "kind": "node",
        "id": "<img src=x onerror=alert(1)>",
        "relation": "subject",
        "events": [{"type": "MemoryNode.<b>Created</b>"}],
        "decisions": [
            {"source": "patrol", "task": "<script>x</script>", "model": "m\"'", "validation": "ok"}
        ],
        "children": [{"kind": "note", "id": "n1", "relation": "source <i>note</i>", "ref": True}],
    }
    svg = str(lineage_svg({"tree": tree}, "being-1"))
    assert "<script>" not in svg and "<img" not in svg and "<b>" not in svg and "<i>" not in svg
    assert "&lt;script&gt;" in svg and 'href="/ui/beings/being-1/notes/n1"' in svg


def test_every_kind_has_its_state_timeline_lineage_as_of_and_refusals(ui: Ui) -> None:
    fact = ui.engram.facts.state("Aria", FactInput(text="Aria keeps bees", subject="aria"))
    items = {
        "nodes": ui.dead["id"],
        "clusters": ui.dead["cluster_id"],
        "notes": ui.notes[1],
        "facts": fact.fact_id,
    }
    for plural, item_id in items.items():
        url = ui.url(plural, str(item_id))
        html = ui.get(url, who="Aria").text
        assert 'id="state"' in html and "State now" in html, plural
        assert '<ul class="diff">' in _section(html, "timeline"), plural
        assert '<svg class="lineage"' in _section(html, "lineage"), plural
        first = ui.get(f"{url}?as_of=1", who="Aria").text
        assert '<tr class="shown" id="v1">' in first, plural
        assert ui.get(url, who="Bruno").status_code == 403, plural
