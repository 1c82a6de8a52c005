"""The beings page and a being's overview, without a browser (both backends): counts, the cluster
tree, the plots, patrol runs a page at a time, escaping, 403 and 404 pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.node import MemoryNode
from engram.services.bootstrap import Engram
from engram.services.commands import FactInput, MessageInput
from engram.services.tokens import TokenService
from tests.patrol_support import UNRELATED, note_scenes, scene, topic_scenes, unrelated_scenes

Client = tuple[TestClient, dict[str, str]]


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def ui(engram: Engram) -> Iterator[Client]:
    engram.beings.register("Aria")
    engram.beings.register("Bruno")
    service = TokenService(engram)
    tokens = {
        "admin": service.issue(admin=True).token,
        "Aria": service.issue(being="Aria").token,
        "Bruno": service.issue(being="Bruno").token,
    }
    app = create_app(engram, settings=HttpSettings(token_refresh_s=0.001), warm_up=False)
    with TestClient(app, follow_redirects=False) as client:
        yield client, tokens


def _counts(html: str, being_id: str) -> dict[str, int]:
    row = re.search(rf'<tr data-being="{being_id}">(.*?)</tr>', html, re.S)
    assert row, html
    cells = dict(re.findall(r'<td class="num (\w+)">([\d,]+)</td>', row.group(1)))
    return {k: int(v.replace(",", "")) for k, v in cells.items()}


def _being(engram: Engram, name: str) -> str:
    engram.views.ensure(names=["beings"])
    row = engram.views.read.being_by_name(name)
    assert row is not None
    return str(row["id"])


def _faint(n: int) -> list[str]:
    """Scenes unlike the others, of importance 0.04: dying from their first patrol."""
    return [scene(a, d, importance=0.04) for a, d in UNRELATED[-n:]]


def _kill_one_dying(engram: Engram, being_id: str) -> None:
    """One of the dying nodes made dead, as a consolidation without a merge partner does."""
    engram.views.ensure(names=["memory"])
    first = engram.views.read.nodes(UUID(being_id), statuses=["dying"], limit=1)[0]
    node = engram.store.get(MemoryNode, UUID(first["id"]))
    node.make_dead(1, "test", engram.clock.now())
    engram.store.save(node)


def test_the_beings_page_counts_each_beings_memory(engram: Engram, ui: Client) -> None:
    client, tokens = ui
    # Two scenes of importance 0.04: at or below 0.05 at once, flagged dying by the first patrol.
    note_scenes(engram, "Aria", topic_scenes("sailing", 6) + unrelated_scenes(2) + _faint(2))
    engram.patrol("Aria")
    aria = _being(engram, "Aria")
    _kill_one_dying(engram, aria)
    engram.facts.state("Aria", FactInput(text="Aria sails on Sundays", subject="aria"))
    engram.facts.state("Aria", FactInput(text="Aria likes rye bread", subject="aria"))
    engram.messages.take("Bruno", MessageInput(id="m1", user="ben", text="hello there"))

    page = client.get("/ui/beings", headers=_headers(tokens["admin"]))
    assert page.status_code == 200
    assert _counts(page.text, aria) == {
        "notes": 10,
        "alive": 8,
        "dying": 1,
        "dead": 1,
        "clusters": 1,
        "facts": 2,
        "sessions": 0,
    }
    assert _counts(page.text, _being(engram, "Bruno")) == {
        "notes": 0,
        "alive": 0,
        "dying": 0,
        "dead": 0,
        "clusters": 0,
        "facts": 0,
        "sessions": 1,
    }
    assert '<span class="mode awake">awake</span>' in page.text
    # A being token sees its own row only.
    mine = client.get("/ui/beings", headers=_headers(tokens["Bruno"]))
    assert mine.status_code == 200 and ">Bruno</a>" in mine.text and ">Aria</a>" not in mine.text


def test_the_overview_shows_the_cluster_tree_the_plots_and_the_patrol_runs(
    engram: Engram, ui: Client
) -> None:
    client, tokens = ui
    note_scenes(engram, "Aria", topic_scenes("sailing", 6) + unrelated_scenes(2) + _faint(2))
    engram.patrol("Aria")
    aria = _being(engram, "Aria")
    _kill_one_dying(engram, aria)
    engram.views.ensure(names=["memory"])
    topic = next(c for c in engram.views.read.clusters(UUID(aria)) if not c["is_root"])
    alive = engram.views.read.nodes(UUID(aria), statuses=["active"], limit=1)[0]
    engram.nodes.pin("Aria", UUID(alive["id"]))  # pinned: it keeps its importance, 0.5

    page = client.get(f"/ui/beings/{aria}", headers=_headers(tokens["Aria"]))
    assert page.status_code == 200, page.text
    html = page.text
    # The tree: both roots, the topic under one of them with its size, linked to its cluster page.
    tree = html[html.index('id="cluster-tree"') : html.index("</ul>\n", html.index('id="cluster-tree"'))]
    assert ">Business</a>" in tree and ">Private</a>" in tree
    assert f'href="/ui/beings/{aria}/clusters/{topic["id"]}">{topic["name"]}</a>' in tree
    assert "6 alive / 6" in tree
    # The histogram: 7 alive nodes of importance 0.5 one session on (0.48), the pinned one at 0.5,
    # and the dying one.
    assert '<svg class="plot histogram"' in html
    assert "0.45–0.50: 7 alive, 0 dying" in html and "0.50–0.55: 1 alive, 0 dying" in html
    assert "0.00–0.05: 0 alive, 1 dying" in html
    # The state changes of the patrol: 10 created, 2 flagged dying.
    assert '<svg class="plot series"' in html
    assert "cycle 1: 10 created" in html and "cycle 1: 2 flagged dying" in html
    # The run with its steps and their counts, and its LLM calls.
    run = re.search(r'<tr data-cycle="1">(.*?)</tr>', html, re.S)
    assert run is not None
    assert "notes_to_nodes" in run.group(1) and "nodes_created 10" in run.group(1)
    assert "the LLM is turned off" in run.group(1)
    cards = dict(re.findall(r'data-count="(\w+)"><div class="value">([\d,]+)<', html))
    assert cards == {
        "notes": "10",
        "alive": "8",
        "dying": "1",
        "dead": "1",
        "clusters": "1",
        "facts": "0",
        "sessions": "0",
    }


def test_patrol_runs_come_a_page_at_a_time(engram: Engram, ui: Client) -> None:
    client, tokens = ui
    note_scenes(engram, "Aria", unrelated_scenes(2))
    for _ in range(12):
        engram.patrol("Aria")
    aria = _being(engram, "Aria")
    first = client.get(f"/ui/beings/{aria}", headers=_headers(tokens["admin"])).text
    assert re.findall(r'<tr data-cycle="(\d+)">', first) == [str(c) for c in range(12, 2, -1)]
    assert f'href="/ui/beings/{aria}?before=3"' in first
    # The plot covers every run, not only the page's.
    assert "cycle 1: 2 created" in first
    older = client.get(f"/ui/beings/{aria}?before=3", headers=_headers(tokens["admin"])).text
    assert re.findall(r'<tr data-cycle="(\d+)">', older) == ["2", "1"]
    assert "?before=" not in older and f'href="/ui/beings/{aria}">Latest runs' in older
    bad = client.get(f"/ui/beings/{aria}?before=soon", headers=_headers(tokens["admin"]))
    assert bad.status_code == 422 and "cycle number" in bad.text


def test_names_are_escaped_in_the_tree_and_nothing_planted_runs(engram: Engram, ui: Client) -> None:
    client, tokens = ui
    aria = _being(engram, "Aria")
    being = engram.store.get(Being, UUID(aria))
    evil = "<script>window.__pwned=1</script>"
    root = engram.store.get(Cluster, being.private_root_id)
    engram.store.save(Cluster.create_sub(uuid4(), root, evil, engram.clock.now()))
    html = client.get(f"/ui/beings/{aria}", headers=_headers(tokens["Aria"])).text
    assert evil not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


def test_another_beings_overview_is_a_403_page_and_an_unknown_one_a_404(ui: Client) -> None:
    client, tokens = ui
    refused = client.get("/ui/beings/Bruno", headers=_headers(tokens["Aria"]))
    assert refused.status_code == 403 and "another being" in refused.text
    missing = client.get("/ui/beings/Nobody", headers=_headers(tokens["admin"]))
    assert missing.status_code == 404 and "Not found" in missing.text and "Traceback" not in missing.text
    by_name = client.get("/ui/beings/Aria", headers=_headers(tokens["Aria"]))
    assert by_name.status_code == 200 and "No patrol yet" in by_name.text
