"""The explorer's log page (`/ui/log`) through FastAPI's TestClient, on both backends: filters,
pagination by position, the live block's fragment, admin only, bad filters as a page."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote
from uuid import UUID

from engram.services.commands import NoteInput
from engram.services.log_view import LogFilter, log_page
from tests.integration import ui_pages_support
from tests.integration.ui_pages_support import GARDEN, Explorer
from tests.patrol_support import scene

explorer = ui_pages_support.explorer  # the fixture, shared by the page tests


def _positions(html: str) -> list[int]:
    return [int(p) for p in re.findall(r'data-position="(\d+)"', html)]


def test_the_log_opens_on_its_newest_events_and_pages_by_position(explorer: Explorer) -> None:
    explorer.log_in("admin")
    head = explorer.engram.store.head()
    newest = explorer.client.get("/ui/log?limit=5")
    assert newest.status_code == 200
    assert _positions(newest.text) == list(range(head - 4, head + 1))
    first = explorer.client.get("/ui/log?after=0&limit=3")
    assert _positions(first.text) == [1, 2, 3]
    following = re.search(r'href="/ui/log\?([^"]*)" id="next-page"', first.text)
    assert following, first.text
    second = explorer.client.get("/ui/log?" + following.group(1).replace("&amp;", "&"))
    assert _positions(second.text) == [4, 5, 6]


def test_filters_by_being_type_aggregate_and_time(explorer: Explorer) -> None:
    explorer.log_in("admin")
    engram = explorer.engram
    aria = engram.views.read.beings()
    aria_id = next(b["id"] for b in aria if b["name"] == "Aria")
    bruno = explorer.client.get("/ui/log?being=Bruno")
    assert bruno.status_code == 200 and _positions(bruno.text)
    assert aria_id not in bruno.text
    created = explorer.client.get("/ui/log?type=Noted&after=0")
    types = set(re.findall(r'href="/ui/log\?type=([^"&]+)"', created.text))
    assert types and all(t == "Note.Noted" for t in types), types
    node_id = explorer.nodes[GARDEN[0]]
    one = explorer.client.get(f"/ui/log?aggregate={node_id}")
    positions = _positions(one.text)
    assert positions == sorted(engram.store.positions(UUID(node_id)).values())
    later = quote((engram.clock.now() + timedelta(hours=1)).isoformat())
    none_since = explorer.client.get(f"/ui/log?since={later}")
    assert none_since.status_code == 200 and _positions(none_since.text) == []
    assert _positions(explorer.client.get(f"/ui/log?until={later}&limit=3").text) == [1, 2, 3]


def test_a_filter_reads_a_bounded_slice_of_the_log(explorer: Explorer) -> None:
    import engram.services.log_view as log_view

    engram = explorer.engram
    saved = log_view.MAX_SCAN
    log_view.MAX_SCAN = 3
    try:
        page = log_page(engram.audit, LogFilter(type="NoSuchEvent"), after=0, limit=10)
    finally:
        log_view.MAX_SCAN = saved
    assert page.entries == [] and page.scanned_to == 3 and page.more


def test_the_live_block_shows_what_came_after_the_page(explorer: Explorer) -> None:
    explorer.log_in("admin")
    page = explorer.client.get("/ui/log")
    live = re.search(r'data-live="(/ui/log/live\?[^"]+)"', page.text)
    assert live, page.text
    url = live.group(1).replace("&amp;", "&")
    quiet = explorer.client.get(url, headers={"X-Fragment": "1"})
    assert quiet.status_code == 200 and "no new event yet" in quiet.text and "<header" not in quiet.text
    explorer.engram.notes.take_many("Bruno", [NoteInput(text=scene("Tuned the cello", "2026-05-03"))])
    fresh = explorer.client.get(url, headers={"X-Fragment": "1"})
    assert "new event" in fresh.text and _positions(fresh.text)
    assert min(_positions(fresh.text)) > int(re.search(r"after=(\d+)", url).group(1))  # type: ignore[union-attr]


def test_the_log_is_for_admins_and_bad_filters_are_a_page(explorer: Explorer) -> None:
    aria = {"Authorization": f"Bearer {explorer.tokens['Aria']}"}
    refused = explorer.client.get("/ui/log", headers=aria)
    assert refused.status_code == 403 and "admin token" in refused.text
    assert explorer.client.get("/ui/log/live?after=0", headers=aria).status_code == 403
    explorer.log_in("admin")
    bad = explorer.client.get("/ui/log?since=yesterday")
    assert bad.status_code == 422 and "since is not an ISO instant" in bad.text
    naive = explorer.client.get("/ui/log?until=2026-11-27T20:00:00")
    assert naive.status_code == 422 and "needs a timezone" in naive.text
    not_id = explorer.client.get("/ui/log?aggregate=nope")
    assert not_id.status_code == 422 and "not a UUID" in not_id.text
    nobody = explorer.client.get("/ui/log?being=Nobody")
    assert nobody.status_code == 404


def test_event_payloads_are_escaped(explorer: Explorer) -> None:
    explorer.log_in("admin")
    page = explorer.client.get("/ui/log?type=Noted&after=0&limit=50")
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text
    assert "<script>window.__pwned" not in page.text
