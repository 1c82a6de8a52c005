"""The message routes over HTTP in-process (FastAPI's TestClient), on both backends: one message or a
batch, 201/200/409 as for notes, bad input refused naming the field with nothing written, search with
its filters and hostile queries, and being tokens kept to their being."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.tokens import TokenService
from tests.lifecycle_cases import names_field
from tests.message_cases import GOOD, bad_messages

Api = tuple[TestClient, dict[str, str], dict[str, str]]
URL = "/v1/beings/Aria/messages"


@pytest.fixture
def api(engram: Engram) -> Iterator[Api]:
    """A client, Aria's being token's headers and Bo's."""
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    tokens = TokenService(engram)
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    bo = {"Authorization": f"Bearer {tokens.issue(being='Bo').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, aria, bo


def _msg(key: str, text: str = "Shall we plant the tomatoes?", **kw: Any) -> dict[str, Any]:
    return {"id": key, "user": "mina", "text": text, "at": "2026-10-30T09:00:00Z", **kw}


def test_one_message_is_201_then_200_and_other_content_409(api: Api, engram: Engram) -> None:
    client, aria, _ = api
    first = client.post(URL, json=_msg("m-1", channel="tg"), headers=aria)
    assert first.status_code == 201, first.text
    body = first.json()
    assert (body["id"], body["number"], body["duplicate"], body["journalled"]) == ("m-1", 1, False, True)
    head = engram.store.head()
    again = client.post(URL, json=_msg("m-1", channel="tg"), headers=aria)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["message_id"] == body["message_id"]
    other = client.post(URL, json=_msg("m-1", text="Something else", channel="tg"), headers=aria)
    assert other.status_code == 409 and other.json()["code"] == "conflict", other.text
    assert engram.store.head() == head


def test_a_batch_is_all_or_none(api: Api, engram: Engram) -> None:
    client, aria, _ = api
    batch = {"messages": [_msg("b-1"), _msg("b-2", role="assistant", text="Yes, Saturday.")]}
    taken = client.post(URL, json=batch, headers=aria)
    assert taken.status_code == 201, taken.text
    assert [m["number"] for m in taken.json()["messages"]] == [1, 2]
    replay = client.post(URL, json=batch, headers=aria)
    assert replay.status_code == 200 and all(m["duplicate"] for m in replay.json()["messages"])
    head = engram.store.head()
    refused = client.post(URL, json={"messages": [_msg("b-3"), _msg("b-1", text="changed")]}, headers=aria)
    assert refused.status_code == 409 and refused.json()["details"]["index"] == 1, refused.text
    bad = client.post(URL, json={"messages": [_msg("b-4"), {**_msg("b-5"), "role": "bot"}]}, headers=aria)
    assert bad.status_code == 422 and names_field("role", [e["field"] for e in bad.json()["errors"]])
    assert client.post(URL, json={"messages": []}, headers=aria).status_code == 422
    assert engram.store.head() == head


@bad_messages()
def test_bad_messages_are_refused_naming_the_field(
    api: Api, engram: Engram, fields: dict[str, Any], field: str, code: str
) -> None:
    client, aria, _ = api
    head = engram.store.head()
    refused = client.post(URL, json=fields, headers=aria)
    assert refused.status_code == (413 if code == "payload_too_large" else 422), refused.text
    assert refused.json()["code"] == code
    assert names_field(field, [e["field"] for e in refused.json().get("errors") or []]), refused.json()
    many = client.post(URL, json={"messages": [{**GOOD, "id": "fine"}, fields]}, headers=aria)
    assert many.status_code in (413, 422) and names_field(
        field, [e["field"] for e in many.json().get("errors") or []]
    ), many.json()
    assert engram.store.head() == head


def test_a_being_token_reaches_its_being_only(api: Api) -> None:
    client, aria, bo = api
    client.post(URL, json=_msg("m-1"), headers=aria)
    assert client.post(URL, json=_msg("m-2"), headers=bo).status_code == 404
    assert client.get(f"{URL}/search", params={"q": "tomatoes"}, headers=bo).status_code == 404
    mine = client.get("/v1/beings/Bo/messages/search", params={"q": "tomatoes"}, headers=bo)
    assert mine.status_code == 200 and mine.json()["hits"] == []


def test_search_filters_and_ranks(api: Api) -> None:
    client, aria, _ = api
    for key, user, channel, at, text in (
        ("s-1", "mina", "tg", "2026-10-30T09:00:00Z", "The tomatoes are ripe"),
        ("s-2", "mina", "mail", "2026-10-31T09:00:00Z", "The tomatoes are ripe"),
        ("s-3", "tom", "tg", "2026-10-31T10:00:00Z", "Tomatoes, tomatoes, tomatoes everywhere"),
        ("s-4", "tom", "tg", "2026-10-31T11:00:00Z", "Nothing about the garden"),
    ):
        posted = client.post(
            URL, json={"id": key, "user": user, "channel": channel, "at": at, "text": text}, headers=aria
        )
        assert posted.status_code == 201, posted.text

    def ids(**params: Any) -> list[str]:
        found = client.get(f"{URL}/search", params=params, headers=aria)
        assert found.status_code == 200, found.text
        return [h["id"] for h in found.json()["hits"]]

    assert ids(q="tomatoes") == ["s-3", "s-2", "s-1"]  # three times first, then the newest of equals
    assert ids(q="tomatoes", channel="tg") == ["s-3", "s-1"]
    assert ids(q="tomatoes", user="mina", limit=1) == ["s-2"]
    hit = client.get(f"{URL}/search", params={"q": "ripe", "channel": "tg"}, headers=aria).json()["hits"][0]
    assert {k: hit[k] for k in ("id", "user", "channel", "role", "at")} == {
        "id": "s-1",
        "user": "mina",
        "channel": "tg",
        "role": "user",
        "at": "2026-10-30T09:00:00+00:00",
    }
    assert hit["session_id"] and hit["score"] > 0 and hit["snippet"] == "The tomatoes are ripe"


@pytest.mark.parametrize(
    ("q", "status", "want"),
    [
        ("", 422, None),
        ("   ", 422, None),
        ("?!... ---", 200, []),
        ("x" * 10_000, 422, None),
        ("tomatoes'; DROP TABLE message_terms; --", 200, ["s-1"]),
        ('" OR 1=1 --', 200, []),
        ("%", 200, []),
        ("tomat*", 200, []),
        ("tomatoes\x00", 422, None),
    ],
    ids=["empty", "blank", "punctuation", "10000 characters", "sql", "or 1=1", "percent", "star", "nul"],
)
def test_hostile_queries(api: Api, q: str, status: int, want: list[str] | None) -> None:
    client, aria, _ = api
    client.post(URL, json=_msg("s-1", text="The tomatoes are ripe"), headers=aria)
    found = client.get(f"{URL}/search", params={"q": q}, headers=aria)
    assert found.status_code == status, found.text
    if want is None:
        problem = found.json()
        assert problem["code"] == "invalid_input"
        named = [e["field"] for e in problem.get("errors") or []]
        # A NUL never reaches the route: the server refuses a URL that holds one (`%00`).
        assert names_field("q", named) or names_field("query", named) or "NUL" in problem["detail"], problem
    else:
        assert [h["id"] for h in found.json()["hits"]] == want
    again = client.get(f"{URL}/search", params={"q": "ripe"}, headers=aria)
    assert [h["id"] for h in again.json()["hits"]] == ["s-1"]  # the table is still there
