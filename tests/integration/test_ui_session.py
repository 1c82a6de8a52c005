"""The explorer's sessions without a browser: login cookie, bearer header, CSRF, refusals as pages."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.tokens import TokenService


@pytest.fixture
def ui(engram: Engram) -> Iterator[tuple[TestClient, dict[str, str]]]:
    engram.beings.register("Aria")
    engram.beings.register("Bruno")
    service = TokenService(engram)
    tokens = {"admin": service.issue(admin=True).token, "Aria": service.issue(being="Aria").token}
    # Tokens re-read at every request: a revocation shows at once (the server's default: within 1 s).
    app = create_app(engram, settings=HttpSettings(token_refresh_s=0.001), warm_up=False)
    with TestClient(app, follow_redirects=False) as client:
        yield client, tokens


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert found, html
    return found.group(1)


def test_pages_need_a_token_and_send_people_to_the_login_form(ui: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = ui
    response = client.get("/ui/beings")
    assert response.status_code == 303 and response.headers["location"] == "/ui/login?next=/ui/beings"
    form = client.get("/ui/login?next=/ui/beings")
    assert form.status_code == 200 and 'name="token"' in form.text
    assert "script-src 'self'" in form.headers["content-security-policy"]


def test_login_sets_an_http_only_cookie_and_the_beings_page_lists_them(
    ui: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = ui
    done = client.post("/ui/login", data={"token": tokens["admin"], "next": "/ui/beings"})
    assert done.status_code == 303 and done.headers["location"] == "/ui/beings"
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    page = client.get("/ui/beings")
    assert page.status_code == 200 and ">Aria</a>" in page.text and ">Bruno</a>" in page.text


def test_a_bad_token_and_an_outside_next_are_refused(ui: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = ui
    bad = client.post("/ui/login", data={"token": "eng_nope", "next": "/ui/beings"})
    assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers
    away = client.post("/ui/login", data={"token": tokens["admin"], "next": "https://evil.example/x"})
    assert away.status_code == 303 and away.headers["location"] == "/ui/beings"


def test_a_bearer_header_works_for_scripts_and_a_being_token_sees_its_own_only(
    ui: tuple[TestClient, dict[str, str]],
) -> None:
    client, tokens = ui
    mine = client.get("/ui/beings", headers={"Authorization": f"Bearer {tokens['Aria']}"})
    assert mine.status_code == 200 and ">Aria</a>" in mine.text and "Bruno" not in mine.text
    dead = client.get("/ui/beings", headers={"Authorization": "Bearer eng_revoked"})
    assert dead.status_code == 401 and "Not logged in" in dead.text


def test_logout_needs_the_pages_csrf_token(ui: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = ui
    client.post("/ui/login", data={"token": tokens["admin"], "next": "/ui/beings"})
    forged = client.post("/ui/logout", data={"csrf_token": "0" * 64})
    assert forged.status_code == 400 and "Form refused" in forged.text
    token = _csrf(client.get("/ui/beings").text)
    out = client.post("/ui/logout", data={"csrf_token": token})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"


def test_a_revoked_token_goes_back_to_the_login_form(
    ui: tuple[TestClient, dict[str, str]], engram: Engram
) -> None:
    client, _ = ui
    service = TokenService(engram)
    issued = service.issue(admin=True)
    client.post("/ui/login", data={"token": issued.token, "next": "/ui/beings"})
    assert client.get("/ui/beings").status_code == 200
    service.revoke(issued.prefix, "test")
    gone = client.get("/ui/beings")
    assert gone.status_code == 303 and "expired=1" in gone.headers["location"]


def test_static_assets_ship_in_the_package(ui: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = ui
    script = client.get("/ui/static/ui.js")
    style = client.get("/ui/static/ui.css")
    assert script.status_code == 200 and "data-live" in script.text
    assert style.status_code == 200 and "table.list" in style.text


def test_a_query_value_of_the_wrong_type_is_a_page_not_a_500(ui: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = ui
    headers = {"Authorization": f"Bearer {tokens['admin']}"}
    response = client.get("/ui/admin", params={"revoked": "abc"}, headers=headers)
    assert response.status_code == 422 and "Not understood" in response.text and "revoked" in response.text
    assert "Traceback" not in response.text
