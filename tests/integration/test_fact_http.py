"""The fact routes over HTTP in-process, on both backends: write (one or a batch), list, pin, archive,
history, lore, spaces (admin to create and join; a being token leaves), entity merges; the shared bad
facts refused naming the field with nothing written; and the tenant probes: a being token reads its
own and its spaces' facts, nothing else (0 leaks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.tokens import TokenService
from tests.fact_cases import GOOD, bad_facts
from tests.lifecycle_cases import names_field

Api = tuple[TestClient, dict[str, dict[str, str]]]


@pytest.fixture
def api(engram: Engram) -> Iterator[Api]:
    """A client and the headers of Aria's, Bo's, Cy's tokens and an admin's."""
    for name in ("Aria", "Bo", "Cy"):
        engram.beings.register(name)
    tokens = TokenService(engram)
    headers = {n: {"Authorization": f"Bearer {tokens.issue(being=n).token}"} for n in ("Aria", "Bo", "Cy")}
    headers["admin"] = {"Authorization": f"Bearer {tokens.issue(admin=True).token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, headers


def _url(being: str, tail: str = "") -> str:
    return f"/v1/beings/{being}/facts{tail}"


def test_write_list_pin_archive_and_history(api: Api) -> None:
    client, h = api
    key = {"memory_key": "profile|person|mina|fact"}
    first = client.post(_url("Aria"), json={**GOOD, **key}, headers=h["Aria"])
    assert first.status_code == 201 and first.json()["outcome"] == "stated"
    again = client.post(_url("Aria"), json={**GOOD, **key}, headers=h["Aria"]).json()
    assert (again["outcome"], again["importance"], again["version"]) == ("reinforced", 2, 2)
    fact_id = first.json()["fact_id"]
    batch = client.post(_url("Aria"), json={"facts": [{**GOOD, "text": "Mina likes tea"}]}, headers=h["Aria"])
    assert batch.status_code == 201 and len(batch.json()["facts"]) == 1
    listed = client.get(_url("Aria"), headers=h["Aria"]).json()
    assert {r["text"] for r in listed} == {"Mina lives in Austin", "Mina likes tea"}
    assert client.post(_url("Aria", f"/{fact_id}/pin"), headers=h["Aria"]).status_code == 200
    refused = client.post(_url("Aria", f"/{fact_id}/archive"), headers=h["Aria"])
    assert refused.status_code == 409, refused.text
    client.post(_url("Aria", f"/{fact_id}/unpin"), headers=h["Aria"])
    assert (
        client.post(_url("Aria", f"/{fact_id}/archive"), headers=h["Aria"]).json()["details"]["status"]
        == "archived"
    )
    assert [r["text"] for r in client.get(_url("Aria"), headers=h["Aria"]).json()] == ["Mina likes tea"]
    assert len(client.get(_url("Aria"), params={"all": "true"}, headers=h["Aria"]).json()) == 2
    then = client.get(_url("Aria", f"/{fact_id}"), params={"as_of": "1"}, headers=h["Aria"]).json()
    assert (then["version"], then["importance"], then["latest_version"]) == (
        1,
        1,
        5,
    )  # stated, reinforced, pinned, unpinned, archived
    history = client.get(_url("Aria", f"/{fact_id}/history"), headers=h["Aria"]).json()
    assert [e["type"] for e in history][-1] == "Fact.Archived"
    lore = client.post("/v1/beings/Aria/lore", json={"line": "the harbour floods"}, headers=h["Aria"])
    assert lore.status_code == 201 and lore.json()["outcome"] == "stated"


@bad_facts()
def test_bad_facts_are_refused_naming_the_field(
    api: Api, engram: Engram, fields: dict[str, Any], field: str, code: str
) -> None:
    client, h = api
    head = engram.store.head()
    refused = client.post(_url("Aria"), json=fields, headers=h["Aria"])
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["code"] == code
    named = [e["field"] for e in body.get("errors") or []] + [body.get("field") or ""]
    assert names_field(field.split(".")[0], named), body
    assert engram.store.head() == head


def test_spaces_and_tenant_probes(api: Api, engram: Engram) -> None:
    client, h = api
    assert (
        client.post(
            "/v1/admin/spaces", json={"name": "family", "beings": ["Aria"]}, headers=h["Aria"]
        ).status_code
        == 403
    )
    made = client.post(
        "/v1/admin/spaces", json={"name": "family", "beings": ["Aria", "Bo"]}, headers=h["admin"]
    )
    assert made.status_code == 201, made.text
    assert (
        client.post("/v1/admin/spaces/family/members", json={"being": "Cy"}, headers=h["Cy"]).status_code
        == 403
    )
    shared = client.post(_url("Bo"), params={"space": "family"}, json=GOOD, headers=h["Bo"]).json()
    own = client.post(_url("Cy"), json={**GOOD, "text": "Cy keeps bees"}, headers=h["Cy"]).json()
    outsider = client.post(_url("Cy"), params={"space": "family"}, json=GOOD, headers=h["Cy"])
    assert outsider.status_code == 422 and outsider.json()["errors"][0]["field"] == "space"
    seen = {n: {r["id"] for r in client.get(_url(n), headers=h[n]).json()} for n in ("Aria", "Bo", "Cy")}
    assert seen == {"Aria": {shared["fact_id"]}, "Bo": {shared["fact_id"]}, "Cy": {own["fact_id"]}}
    # 0 leaks: another being's path, another's fact through one's own path
    assert client.get(_url("Aria"), headers=h["Cy"]).status_code == 404
    assert client.get(_url("Cy", f"/{shared['fact_id']}"), headers=h["Cy"]).status_code == 404
    for verb in ("pin", "archive", "history"):
        method = client.get if verb == "history" else client.post
        assert method(_url("Cy", f"/{shared['fact_id']}/{verb}"), headers=h["Cy"]).status_code == 404
        assert method(_url("Aria", f"/{own['fact_id']}/{verb}"), headers=h["Aria"]).status_code == 404
    assert [s["name"] for s in client.get("/v1/beings/Aria/spaces", headers=h["Aria"]).json()] == ["family"]
    assert client.delete("/v1/beings/Bo/spaces/family", headers=h["Bo"]).status_code == 200
    assert client.get(_url("Bo"), headers=h["Bo"]).json() == []
    merged = client.post(
        "/v1/beings/Aria/entities/merge",
        json={"alias": "person:makesh", "into": "person:mukesh"},
        headers=h["Aria"],
    )
    assert merged.status_code == 200, merged.text
    cycle = client.post(
        "/v1/beings/Aria/entities/merge",
        json={"alias": "person:mukesh", "into": "person:makesh"},
        headers=h["Aria"],
    )
    assert cycle.status_code in (409, 422)
    assert (
        client.post(
            "/v1/beings/Aria/entities/unmerge", json={"alias": "person:makesh"}, headers=h["Aria"]
        ).status_code
        == 200
    )
