"""The explorer's search page (`/ui/beings/{being}/search`) through FastAPI's TestClient, on both
backends: query with each hit's score broken down, recall and keyword search saying what they
reactivated, CSRF, a being token kept to its being, bad input as a page."""

from __future__ import annotations

import re

import pytest

from engram.services.reading import Explained
from tests.integration import ui_pages_support
from tests.integration.ui_pages_support import GARDEN, PLANTED, Explorer

explorer = ui_pages_support.explorer  # the fixture, shared by the page tests

URL = "/ui/beings/Aria/search"


def _reactivations(e: Explorer) -> dict[str, int]:
    e.engram.views.ensure()
    being_id = e.engram.views.read.beings()[0]["id"]
    rows = e.engram.views.read.nodes(being_id)
    return {r["action"]: r["reactivation_count"] for r in rows}


def test_query_explained_breaks_each_score_into_parts_that_add_up(explorer: Explorer) -> None:
    found = explorer.engram.reading.query("Aria", "tomato garden", 5, reactivate=False, explain=True)
    assert isinstance(found, Explained) and found.nodes
    for node in found.nodes:
        parts = found.parts[node.id]
        assert {"lexical", "semantic"} & set(parts)
        assert sum(parts.values()) == pytest.approx(node.score)
    plain = explorer.engram.reading.query("Aria", "tomato garden", 5, reactivate=False)
    assert not isinstance(plain, Explained)  # the API's answer is unchanged


def test_a_query_shows_the_breakdown_and_reactivates_only_when_asked(explorer: Explorer) -> None:
    token = explorer.log_in("admin")
    before = _reactivations(explorer)
    form = explorer.client.get(URL)
    assert form.status_code == 200 and 'name="q"' in form.text
    done = explorer.client.post(URL, data={"csrf_token": token, "kind": "query", "q": "tomato garden"})
    assert done.status_code == 200, done.text
    assert 'data-part="lexical"' in done.text and 'data-part="semantic"' in done.text
    assert "reactivated nothing" in done.text and "not reactivated" in done.text
    node_id = explorer.nodes[GARDEN[0]]
    assert 'href="/ui/beings/' in done.text and f"/nodes/{node_id}" in done.text
    assert _reactivations(explorer) == before
    again = explorer.client.post(
        URL, data={"csrf_token": token, "kind": "query", "q": "tomato garden", "reactivate": "on"}
    )
    assert "This query reactivated its hits." in again.text
    after = _reactivations(explorer)
    assert sum(after.values()) > sum(before.values())


def test_recall_and_keyword_search_say_what_they_reactivated(explorer: Explorer) -> None:
    token = explorer.log_in("admin")
    recalled = explorer.client.post(URL, data={"csrf_token": token, "kind": "recall", "q": GARDEN[1]})
    assert recalled.status_code == 200 and "every hit is reactivated" in recalled.text
    assert 'data-part="semantic"' in recalled.text and "reactivated · now" in recalled.text
    before = _reactivations(explorer)
    first = explorer.client.post(URL, data={"csrf_token": token, "kind": "search", "q": "tomato", "k": "2"})
    assert first.status_code == 200 and "This page reactivated all 4 matches." in first.text
    assert re.search(r"2 hits\s+of 4", first.text)
    cursor = re.search(r'name="cursor" value="([^"]+)"', first.text)
    assert cursor, first.text
    assert sum(_reactivations(explorer).values()) == sum(before.values()) + 4
    second = explorer.client.post(
        URL,
        data={"csrf_token": token, "kind": "search", "q": "tomato", "k": "2", "cursor": cursor.group(1)},
    )
    assert "A further page: nothing was reactivated." in second.text
    assert sum(_reactivations(explorer).values()) == sum(before.values()) + 4


def test_memory_text_is_escaped_in_the_hits(explorer: Explorer) -> None:
    token = explorer.log_in("admin")
    done = explorer.client.post(URL, data={"csrf_token": token, "kind": "search", "q": "party"})
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in done.text
    assert PLANTED not in done.text


def test_a_search_without_the_pages_csrf_token_is_refused(explorer: Explorer) -> None:
    explorer.log_in("admin")
    before = _reactivations(explorer)
    forged = explorer.client.post(URL, data={"csrf_token": "0" * 64, "kind": "search", "q": "tomato"})
    assert forged.status_code == 400 and "Form refused" in forged.text
    assert _reactivations(explorer) == before


def test_bad_input_is_a_page_and_another_beings_token_is_refused(explorer: Explorer) -> None:
    token = explorer.log_in("admin")
    bad = explorer.client.post(URL, data={"csrf_token": token, "kind": "query", "q": "x", "profile": "nope"})
    assert bad.status_code == 422 and "unknown profile" in bad.text and 'id="search-error"' in bad.text
    empty = explorer.client.post(URL, data={"csrf_token": token, "kind": "query", "q": "  "})
    assert empty.status_code == 422 and "type something" in empty.text
    huge = explorer.client.post(URL, data={"csrf_token": token, "kind": "query", "q": "x", "k": "1000"})
    assert huge.status_code == 422 and "k is between 1 and 100" in huge.text
    bruno = explorer.client.get(URL, headers={"Authorization": f"Bearer {explorer.tokens['Bruno']}"})
    assert bruno.status_code == 403 and "another being" in bruno.text
    mine = explorer.client.post(
        URL,
        data={"kind": "search", "q": "tomato"},
        headers={"Authorization": f"Bearer {explorer.tokens['Aria']}"},
    )
    assert mine.status_code == 200 and "4 matches" in mine.text
    unknown = explorer.client.get("/ui/beings/Nobody/search")
    assert unknown.status_code == 404
