"""The explorer's admin page (`/ui/admin`) through FastAPI's TestClient, on both backends: admin
only, views' status, a rebuild and a verify run in the background to their end, tokens created
(shown once) and revoked, a being forgotten after its name is typed again, CSRF on every form."""

from __future__ import annotations

import re
import time

import pytest
from fastapi.testclient import TestClient

from tests.integration import ui_pages_support
from tests.integration.ui_pages_support import Explorer

explorer = ui_pages_support.explorer  # the fixture, shared by the page tests

FORMS = {
    "/ui/admin/rebuild": {"view": "memory"},
    "/ui/admin/verify": {"go": "1"},
    "/ui/admin/tokens": {"scope": "being", "being": "Aria", "label": "x"},
    "/ui/admin/forget": {"being": "Bruno", "confirm": "Bruno"},
}


def _finished(client: TestClient, location: str) -> str:
    """The job's page once it says it is done (it runs in a thread of the server)."""
    deadline = time.monotonic() + 120
    while True:
        html = client.get(location, headers={"X-Fragment": "1"}).text
        if "data-live-done" in html:
            return html
        if time.monotonic() > deadline:
            pytest.fail(f"the job never finished: {html}")
        time.sleep(0.05)


def test_a_being_token_gets_the_403_page_everywhere(explorer: Explorer) -> None:
    aria = {"Authorization": f"Bearer {explorer.tokens['Aria']}"}
    page = explorer.client.get("/ui/admin", headers=aria)
    assert page.status_code == 403 and "needs an admin token" in page.text
    for url, form in FORMS.items():
        refused = explorer.client.post(url, data=form, headers=aria)
        assert refused.status_code == 403, url
    assert explorer.engram.views.read.beings()  # Bruno not forgotten


def test_every_form_needs_the_pages_csrf_token(explorer: Explorer) -> None:
    explorer.log_in("admin")
    before = explorer.engram.store.head()
    token_id = explorer.engram.views.read.beings()[0]["id"]  # any id: refused before it is looked at
    for url, form in {**FORMS, f"/ui/admin/tokens/{token_id}/revoke": {}}.items():
        forged = explorer.client.post(url, data={**form, "csrf_token": "0" * 64})
        assert forged.status_code == 400 and "Form refused" in forged.text, url
    assert explorer.engram.store.head() == before  # nothing written
    assert explorer.client.get("/ui/admin").text.count("/ui/admin/jobs/") == 0  # nothing started


def test_the_views_status_and_a_rebuild_to_its_end(explorer: Explorer) -> None:
    csrf = explorer.log_in("admin")
    page = explorer.client.get("/ui/admin")
    assert page.status_code == 200
    for name in ("memory", "notes", "beings"):
        assert f'data-view="{name}"' in page.text
    generation = next(v["generation"] for v in explorer.engram.views.status() if v["name"] == "memory")
    started = explorer.client.post("/ui/admin/rebuild", data={"csrf_token": csrf, "view": "memory"})
    assert started.status_code == 303 and started.headers["location"].startswith("/ui/admin/jobs/")
    first = explorer.client.get(started.headers["location"])
    assert (
        first.status_code == 200 and 'data-live="/ui/admin/jobs/' in first.text and "<progress" in first.text
    )
    done = _finished(explorer.client, started.headers["location"])
    assert "Done: memory rebuilt" in done and 'value="100"' in done
    after = next(v["generation"] for v in explorer.engram.views.status() if v["name"] == "memory")
    assert after > generation
    unknown = explorer.client.post("/ui/admin/rebuild", data={"csrf_token": csrf, "view": "nope"})
    assert unknown.status_code == 404 and "no view named" in unknown.text
    assert explorer.client.get("/ui/admin/jobs/nope").status_code == 404


def test_verify_shows_the_chains_verdict(explorer: Explorer) -> None:
    csrf = explorer.log_in("admin")
    started = explorer.client.post("/ui/admin/verify", data={"csrf_token": csrf})
    assert started.status_code == 303
    done = _finished(explorer.client, started.headers["location"])
    head = explorer.engram.store.head()
    assert "Chain intact" in done and f"head at position {head}" in done


def test_a_token_is_shown_once_and_revoked(explorer: Explorer) -> None:
    csrf = explorer.log_in("admin")
    made = explorer.client.post(
        "/ui/admin/tokens", data={"csrf_token": csrf, "scope": "being", "being": "Bruno", "label": "auditor"}
    )
    assert made.status_code == 201 and "shown this once" in made.text
    found = re.search(r'<pre id="new-token">([^<]+)</pre>', made.text)
    assert found
    token = found.group(1)
    assert made.headers["cache-control"] == "no-store"
    listing = explorer.client.get("/ui/admin")
    assert token not in listing.text and "auditor" in listing.text
    bruno = explorer.client.get("/ui/beings", headers={"Authorization": f"Bearer {token}"})
    assert bruno.status_code == 200 and ">Bruno</a>" in bruno.text
    token_id = next(t.id for t in explorer.client.app.state.tokens.list() if t.label == "auditor")  # type: ignore[attr-defined]
    revoked = explorer.client.post(f"/ui/admin/tokens/{token_id}/revoke", data={"csrf_token": csrf})
    assert revoked.status_code == 303
    dead = explorer.client.get("/ui/beings", headers={"Authorization": f"Bearer {token}"})
    assert dead.status_code == 401
    shown = explorer.client.get("/ui/admin?revoked=1")
    assert re.search(rf'data-token="{token_id}">.*?revoked', shown.text, re.S)
    bad = explorer.client.post("/ui/admin/tokens", data={"csrf_token": csrf, "scope": "being", "being": ""})
    assert bad.status_code == 422 and "either for one being or admin" in bad.text


def test_forgetting_a_being_needs_its_name_typed_again(explorer: Explorer) -> None:
    csrf = explorer.log_in("admin")
    before = explorer.engram.store.head()
    wrong = explorer.client.post(
        "/ui/admin/forget", data={"csrf_token": csrf, "being": "Bruno", "confirm": "bruno"}
    )
    assert wrong.status_code == 422 and "type the being&#39;s name, Bruno" in wrong.text
    assert explorer.engram.store.head() == before
    done = explorer.client.post(
        "/ui/admin/forget", data={"csrf_token": csrf, "being": "Bruno", "confirm": "Bruno"}
    )
    assert done.status_code == 200 and "<h1>Forgotten</h1>" in done.text and "Receipt" in done.text
    assert explorer.engram.store.head() > before
