"""Lifecycle notes over HTTP in-process (FastAPI's TestClient), on both backends: the note routes take
the fields and refuse bad ones naming the field with nothing written; the list route's filters and
states; sensitive notes for admin tokens only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.tokens import TokenService
from tests.lifecycle_cases import bad_lifecycles, names_field

Api = tuple[TestClient, dict[str, str], dict[str, str]]


@pytest.fixture
def api(engram: Engram) -> Iterator[Api]:
    """A client, an admin token's headers and Aria's being token's headers."""
    engram.beings.register("Aria")
    tokens = TokenService(engram)
    admin = {"Authorization": f"Bearer {tokens.issue(admin=True).token}"}
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, admin, aria


def _named(body: dict[str, Any]) -> list[str]:
    return [e["field"] for e in body.get("errors") or []]


@bad_lifecycles()
def test_bad_lifecycles_are_refused_naming_the_field(
    api: Api, engram: Engram, fields: dict[str, Any], field: str
) -> None:
    client, _, aria = api
    head = engram.store.head()
    one = client.post("/v1/beings/Aria/notes", json={"text": "x", **fields}, headers=aria)
    assert one.status_code == 422 and one.json()["code"] == "invalid_input", one.text
    assert names_field(field, _named(one.json())), one.json()
    batch = {"notes": [{"kind": "todo", "text": "fine"}, {"text": "x", **fields}]}
    many = client.post("/v1/beings/Aria/notes/batch", json=batch, headers=aria)
    assert many.status_code == 422 and names_field(field, _named(many.json())), many.json()
    assert engram.store.head() == head


def test_the_note_routes_take_and_show_the_lifecycle(api: Api) -> None:
    client, _, aria = api
    taken = client.post(
        "/v1/beings/Aria/notes",
        json={
            "kind": "log",
            "text": "Nightly import ran",
            "stability": "volatile",
            "ttl_days": 30,
            "at": "2026-10-31T10:00:00Z",
            "tags": ["jobs"],
            "sensitivity": "sensitive",
        },
        headers=aria,
    )
    assert taken.status_code == 201, taken.text
    body = taken.json()
    assert (body["stability"], body["sensitivity"], body["superseded"]) == ("volatile", "sensitive", [])
    assert body["expires_at"] == "2026-11-30T10:00:00+00:00"
    soul = client.post("/v1/beings/Aria/notes", json={"kind": "soul", "text": "Calm."}, headers=aria).json()
    batch = {"notes": [{"kind": "soul", "text": "Calm and brief."}, {"kind": "soul", "text": "Brief."}]}
    souls = client.post("/v1/beings/Aria/notes/batch", json=batch, headers=aria).json()["notes"]
    assert souls[0]["superseded"] == [soul["note_id"]] and souls[1]["superseded"] == [souls[0]["note_id"]]
    assert souls[1]["stability"] == "permanent" and souls[1]["expires_at"] is None


def test_the_list_route_filters_and_shows_states(api: Api) -> None:
    client, admin, aria = api

    def note(**fields: Any) -> str:
        response = client.post("/v1/beings/Aria/notes", json=fields, headers=aria)
        assert response.status_code == 201, response.text
        note_id: str = response.json()["note_id"]
        return note_id

    todo = note(kind="todo", text="Call Mina", tags=["errand"])
    secret = note(kind="knowledge", text="Door code 4711", sensitivity="sensitive")
    old_soul = note(kind="soul", text="Calm.")
    soul = note(kind="soul", text="Calm and brief.")
    project = note(kind="knowledge", text="Beds face south", scope="project-x", tags=["garden"])

    def ids(headers: dict[str, str] = aria, **params: Any) -> list[str]:
        response = client.get("/v1/beings/Aria/notes", params=params, headers=headers)
        assert response.status_code == 200, response.text
        return [n["id"] for n in response.json()]

    assert ids() == [project, soul, todo]
    assert ids(tag=["garden", "errand"]) == [project, todo]
    assert ids(scope="project-x") == [project]
    assert ids(kind=["todo", "soul"], limit=1) == [soul]
    assert ids(kind="todo", unread="true") == [todo]
    every = client.get("/v1/beings/Aria/notes", params={"all": "true"}, headers=aria).json()
    states = {n["id"]: (n["state"], n["superseded_by"]) for n in every}
    assert states[old_soul] == ("superseded", soul) and secret not in states
    refused = client.get("/v1/beings/Aria/notes", params={"include_sensitive": "true"}, headers=aria)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert ids(admin, include_sensitive="true", kind="knowledge") == [project, secret]
    bad = client.get("/v1/beings/Aria/notes", params={"limit": 1001}, headers=aria)
    assert bad.status_code == 422 and names_field("limit", _named(bad.json()))


def test_a_replayed_key_compares_the_lifecycle(api: Api, engram: Engram) -> None:
    client, _, aria = api
    note = {"kind": "reminder", "text": "Bins out", "stability": "volatile", "ttl_days": 7, "tags": ["home"]}
    first = client.post("/v1/beings/Aria/notes", json=note, headers={**aria, "Idempotency-Key": "bins"})
    assert first.status_code == 201, first.text
    again = client.post("/v1/beings/Aria/notes", json={**note, "idempotency_key": "bins"}, headers=aria)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    head = engram.store.head()
    for other in ({"ttl_days": 8}, {"tags": ["garden"]}, {"sensitivity": "sensitive"}):
        conflict = client.post(
            "/v1/beings/Aria/notes", json={**note, **other, "idempotency_key": "bins"}, headers=aria
        )
        assert conflict.status_code == 409 and conflict.json()["code"] == "idempotency_conflict", (
            conflict.text
        )
    assert engram.store.head() == head


def test_a_sensitive_note_and_its_history_need_an_admin_token(api: Api) -> None:
    """The audit routes replay a note's text: a being's token reads a sensitive one nowhere."""
    client, admin, aria = api
    secret = client.post(
        "/v1/beings/Aria/notes",
        json={"kind": "knowledge", "text": "Door code 4711", "sensitivity": "sensitive"},
        headers=aria,
    ).json()["note_id"]
    plain = client.post(
        "/v1/beings/Aria/notes", json={"kind": "knowledge", "text": "Beds face south"}, headers=aria
    )
    plain_id = plain.json()["note_id"]
    for path in (f"/v1/beings/Aria/notes/{secret}", f"/v1/beings/Aria/notes/{secret}/history"):
        refused = client.get(path, headers=aria)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden", path
        assert "4711" not in refused.text
        shown = client.get(path, headers=admin)
        assert shown.status_code == 200 and "4711" in shown.text, path
    assert client.get(f"/v1/beings/Aria/notes/{plain_id}", headers=aria).json()["text"] == "Beds face south"
    assert client.get(f"/v1/beings/Aria/notes/{plain_id}/history", headers=aria).status_code == 200
