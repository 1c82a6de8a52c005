"""The HTTP routes of a note's lifecycle (ADR 0048), in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.domain.note import Note
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.tokens import TokenService


@pytest.fixture
def api(engram: Engram) -> Iterator[tuple[TestClient, dict[str, str], dict[str, str]]]:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    tokens = TokenService(engram)
    admin = {"Authorization": f"Bearer {tokens.issue(admin=True).token}"}
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, admin, aria


def _note(client: TestClient, headers: dict[str, str], text: str, being: str = "Aria", **kw: Any) -> str:
    body = {"kind": "knowledge", "text": text, **kw}
    r = client.post(f"/v1/beings/{being}/notes", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["note_id"])


def test_supersede_chain_and_merge(api: Any, engram: Engram) -> None:
    client, _, aria = api
    a, b = _note(client, aria, "floor 3"), _note(client, aria, "floor 5")
    r = client.post(f"/v1/beings/Aria/notes/{a}/supersede", json={"by": b}, headers=aria)
    assert r.status_code == 200 and r.json()["by"] == b
    chain = client.get(f"/v1/beings/Aria/notes/{b}/chain", headers=aria).json()
    assert [link["id"] for link in chain["replaced"]] == [a] and chain["replaced_by"] == []
    # The events of a note are still at the generic history route.
    events = client.get(f"/v1/beings/Aria/notes/{a}/history", headers=aria).json()
    assert [e["type"] for e in events][-1].endswith("Superseded")
    c, d = _note(client, aria, "milk"), _note(client, aria, "eggs")
    r = client.post("/v1/beings/Aria/notes/merge", json={"ids": [c, d], "llm": False}, headers=aria)
    assert r.status_code == 201 and r.json()["method"] == "concatenation"
    assert engram.store.get(Note, UUID(c)).superseded_by == UUID(r.json()["note_id"])


def test_refusals(api: Any, engram: Engram) -> None:
    client, admin, aria = api
    a, b = _note(client, aria, "one"), _note(client, aria, "two")
    theirs = _note(client, admin, "Bo's", being="Bo")
    head = engram.store.log.head()
    r = client.post(f"/v1/beings/Aria/notes/{a}/supersede", json={"by": a}, headers=aria)
    assert r.status_code == 422 and r.json()["code"] == "invalid_input"
    r = client.post(f"/v1/beings/Aria/notes/{a}/supersede", json={"by": theirs}, headers=aria)
    unknown = client.post(
        f"/v1/beings/Aria/notes/{a}/supersede",
        json={"by": "00000000-0000-0000-0000-0000000000aa"},
        headers=aria,
    )
    assert r.status_code == unknown.status_code == 404
    r = client.post("/v1/beings/Aria/notes/merge", json={"ids": [a]}, headers=aria)
    assert r.status_code == 422
    r = client.post("/v1/beings/Aria/notes/merge", json={"ids": [a, theirs]}, headers=aria)
    assert r.status_code == 404
    assert engram.store.log.head() == head
    client.post(f"/v1/beings/Aria/notes/{a}/supersede", json={"by": b}, headers=aria)
    r = client.post(f"/v1/beings/Aria/notes/{b}/supersede", json={"by": a}, headers=aria)
    assert r.status_code == 409 and r.json()["code"] == "invalid_transition"


def test_a_sensitive_text_in_a_chain_is_for_admins_only(api: Any) -> None:
    client, admin, aria = api
    a = _note(client, aria, "the PIN is 1234", sensitivity="sensitive")
    b = _note(client, aria, "the PIN changed")
    client.post(f"/v1/beings/Aria/notes/{a}/supersede", json={"by": b}, headers=aria)
    assert client.get(f"/v1/beings/Aria/notes/{b}/chain", headers=aria).json()["replaced"][0]["text"] is None
    shown = client.get(f"/v1/beings/Aria/notes/{b}/chain", headers=admin).json()
    assert shown["replaced"][0]["text"] == "the PIN is 1234"


def test_admin_sweep(api: Any, engram: Engram) -> None:
    client, admin, aria = api
    at = engram.clock.now() - timedelta(days=5)
    engram.notes.take("Aria", NoteInput(kind="log", text="old", stability="volatile", ttl_days=1, at=at))
    assert client.post("/v1/admin/notes/sweep", headers=aria).status_code == 403
    r = client.post("/v1/admin/notes/sweep", headers=admin)
    assert r.status_code == 200 and r.json()["expired"] == 1
