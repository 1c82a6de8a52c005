"""The HTTP API end to end: a real `engram serve` process on loopback, driven with httpx.

One server per backend (SQLite, PostgreSQL) serves the whole module. Being tokens and beings are
created over HTTP with an admin token that the CLI issued before the server started (the server
process owns the embedded vector index; the test process never opens it). The last test checks
that every route of the API answered at least one request successfully.
"""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse, urlunparse

import httpx
import pytest

from engram.adapters.locks import AdvisoryLock, FileLock
from engram.services.ports import Lock
from tests.integration.http_support import (
    ANSWERS,
    DIARY,
    FakeOpenAI,
    Server,
    base_env,
    cli,
    running_server,
    scene,
    wait_until,
    without_cid,
)
from tests.support import postgres_schema, postgres_url

PROBLEM = "application/problem+json"


@dataclass
class World:
    backend: str
    server: Server
    env: dict[str, str]
    fake: FakeOpenAI
    admin: str
    tokens: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    database_url: str | None = None

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=60.0)

    @property
    def as_admin(self) -> httpx.Client:
        return self.client(self.admin)

    def view_lock(self, name: str) -> Lock:
        """The lock a view's in-process catch-up takes (see services/views.py `Views.lock`)."""
        if self.database_url is None:
            return FileLock(Path(self.env["ENGRAM_DATA_DIR"]) / "views" / f"{name}.process.lock")
        parsed = urlparse(self.database_url)
        schema = parse_qs(parsed.query).get("schema", ["public"])[0]
        return AdvisoryLock(urlunparse(parsed._replace(query="")), f"engram:{schema}:process:{name}")


def _problem(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    assert body["type"] == f"urn:engram:problem:{body['code']}"
    assert body["correlation_id"] == response.headers["x-request-id"]
    if code is not None:
        assert body["code"] == code, body
    return body


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


# Aria and Bo have the same memories, so that a leak between them would show.
MEMORIES = [
    scene(),
    scene(action="Climbed the north ridge with Lena at dawn", actors=["me", "Lena"], themes=["climbing"]),
    scene(action="Baked sourdough bread for the neighbours", actors=["me"], themes=["baking"]),
]


def _seed(world: World, name: str) -> None:
    c = world.as_admin
    created = _ok(c.post("/v1/beings", json={"name": name, "soul": f"{name} is curious and warm."}), 201)
    world.ids[name] = created["being_id"]
    token = _ok(c.post("/v1/admin/tokens", json={"being": name, "label": f"{name}'s agent"}), 201)
    assert token["scope"] == "being" and token["being"] == name and token["token"].startswith("eng_")
    world.tokens[name] = token["token"]
    taken = _ok(
        c.post(f"/v1/beings/{name}/notes/batch", json={"notes": [{"text": m} for m in MEMORIES]}), 201
    )
    world.notes[name] = [n["note_id"] for n in taken["notes"]]
    report = _ok(c.post(f"/v1/beings/{name}/patrol"))
    assert report["cycle"] == 1 and report["llm"] is None
    nodes = _ok(c.get(f"/v1/beings/{name}/nodes"))
    world.nodes[name] = [n["id"] for n in nodes]
    assert len(nodes) == len(MEMORIES)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    backend: str = request.param
    root = tmp_path_factory.mktemp(f"http-{backend}")
    with FakeOpenAI() as fake:
        extra = {
            "ENGRAM_OPENAI_BASE_URL": fake.url,
            "ENGRAM_LLM_MAX_RETRIES": "0",
            "ENGRAM_CONSISTENCY_TIMEOUT_S": "2",
        }
        if backend == "postgres":
            base = postgres_url()
            assert base, (
                "set ENGRAM_TEST_DATABASE_URL for the PostgreSQL half (scripts/pg-start.sh starts one)"
            )
            with postgres_schema(base) as url:
                env = base_env(root / "data", ENGRAM_DATABASE_URL=url, **extra)
                yield from _world(backend, env, root, fake, url)
        else:
            env = base_env(root / "data", **extra)
            yield from _world(backend, env, root, fake, None)


def _world(
    backend: str, env: dict[str, str], root: Path, fake: FakeOpenAI, url: str | None
) -> Iterator[World]:
    issued = json.loads(cli(env, "token", "create", "--admin", "--label", "tests", "--json").stdout)
    assert issued["scope"] == "admin" and issued["token"].startswith("eng_")
    with running_server(env, root / "server.log") as server:
        w = World(backend, server, env, fake, issued["token"], database_url=url)
        for name in ("Aria", "Bo"):
            _seed(w, name)
        yield w


# -- public, auth ---------------------------------------------------------------------------------


def test_health_and_openapi_need_no_token(world: World) -> None:
    c = world.client()
    assert _ok(c.get("/v1/health"))["status"] == "ok"
    spec = _ok(c.get("/openapi.json"))
    assert spec["info"]["title"] == "Engram"
    assert "/v1/beings/{being}/recall" in spec["paths"] and "/v1/admin/projections" in spec["paths"]
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    recall = spec["paths"]["/v1/beings/{being}/recall"]["post"]
    assert PROBLEM in recall["responses"]["422"]["content"]
    assert "Problem" in spec["components"]["schemas"]


def test_no_token_bad_token_and_wrong_scheme_are_401(world: World) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer eng_" + "A" * 43},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
        {"Authorization": "Bearer " + world.admin[:-1]},
        {"Authorization": "Bearer"},
    ):
        r = world.client(**headers).get("/v1/beings")
        body = _problem(r, 401)
        assert body["code"] in ("unauthenticated", "invalid_token")
        assert r.headers["www-authenticate"].startswith("Bearer")
    # Unknown routes under /v1 answer 401 too: an anonymous caller learns nothing about the API.
    _problem(world.client().get("/v1/nothing-here"), 401, "unauthenticated")


def test_admin_endpoints_refuse_being_tokens_but_admins_reach_beings(world: World) -> None:
    aria = world.client(world.tokens["Aria"])
    _problem(aria.get("/v1/admin/projections"), 403, "forbidden")
    _problem(aria.get("/v1/admin/log"), 403, "forbidden")
    _problem(aria.post("/v1/admin/tokens", json={"admin": True}), 403, "forbidden")
    _problem(aria.post("/v1/beings", json={"name": "Mallory"}), 403, "forbidden")
    assert _ok(world.as_admin.get("/v1/beings/Aria/context"))["being"] == "Aria"
    assert _ok(aria.get("/v1/beings/Aria/context"))["being"] == "Aria"


def test_a_token_revoked_by_the_cli_stops_working(world: World) -> None:
    issued = _ok(world.as_admin.post("/v1/admin/tokens", json={"being": "Aria", "label": "to revoke"}), 201)
    c = world.client(issued["token"])
    assert _ok(c.get("/v1/beings"))[0]["name"] == "Aria"
    done = json.loads(
        cli(world.env, "token", "revoke", issued["prefix"], "--reason", "test", "--json").stdout
    )
    assert done["details"] == {"id": issued["id"], "already_revoked": False}
    assert wait_until(lambda: c.get("/v1/beings").status_code == 401, timeout=5)
    _problem(c.get("/v1/beings"), 401, "invalid_token")
    listed = cli(world.env, "token", "list", "--all", "--json").stdout
    assert issued["token"] not in listed and world.admin not in listed
    row = next(t for t in json.loads(listed) if t["id"] == issued["id"])
    assert row["revoked"] is True and row["being"] == "Aria" and row["label"] == "to revoke"


# -- beings ---------------------------------------------------------------------------------------


def test_beings_create_list_get_as_of_and_history(world: World) -> None:
    c = world.as_admin
    created = _ok(c.post("/v1/beings", json={"name": "Dana", "soul": "Calm."}), 201)
    assert set(created["roots"]) == {"Business", "Private"}
    _problem(c.post("/v1/beings", json={"name": "Dana"}), 409, "duplicate_being")
    _problem(c.post("/v1/beings", json={"name": ""}), 422, "invalid_input")
    _problem(c.post("/v1/beings", json={"name": "Bad\u0007name"}), 422, "invalid_input")
    names = [b["name"] for b in _ok(c.get("/v1/beings"))]
    assert {"Aria", "Bo", "Dana"} <= set(names)
    assert [b["name"] for b in _ok(world.client(world.tokens["Bo"]).get("/v1/beings"))] == ["Bo"]

    by_name = _ok(c.get("/v1/beings/Dana"))
    by_id = _ok(c.get(f"/v1/beings/{created['being_id']}"))
    assert by_name == by_id and by_name["name"] == "Dana" and by_name["soul"] == "Calm."
    assert _ok(c.put("/v1/beings/Dana/soul", json={"soul": "Brave."}))["position"] > 0
    assert _ok(c.get("/v1/beings/Dana"))["soul"] == "Brave."
    assert _ok(c.get("/v1/beings/Dana", params={"as_of": "1"}))["soul"] == ""
    assert _ok(c.get("/v1/beings/Dana", params={"as_of": "2"}))["soul"] == "Calm."
    history = _ok(c.get("/v1/beings/Dana/history"))
    assert [h["type"] for h in history] == ["Being.Registered", "Being.SoulDefined", "Being.SoulDefined"]
    at = history[1]["timestamp"]
    assert _ok(c.get("/v1/beings/Dana", params={"as_of": at}))["soul"] == "Calm."
    _problem(c.get("/v1/beings/Dana", params={"as_of": "yesterday"}), 422, "invalid_input")
    _problem(c.get("/v1/beings/Dana", params={"as_of": "99"}), 404, "not_found")
    _problem(c.get("/v1/beings/Nobody"), 404, "not_found")
    _problem(c.put("/v1/beings/Dana/soul", json={"soul": "x" * (64 * 1024 + 1)}), 422, "invalid_input")


# -- notes ----------------------------------------------------------------------------------------


def test_single_notes_idempotency_and_validation(world: World) -> None:
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Eve"}), 201)
    first = _ok(
        c.post("/v1/beings/Eve/notes", json={"text": scene()}, headers={"Idempotency-Key": "m-1"}), 201
    )
    assert first["parsed"] is True and first["duplicate"] is False
    again = _ok(c.post("/v1/beings/Eve/notes", json={"text": scene(), "idempotency_key": "m-1"}), 200)
    assert again["note_id"] == first["note_id"] and again["duplicate"] is True
    body = _problem(
        c.post(
            "/v1/beings/Eve/notes",
            json={"text": scene(action="Something else")},
            headers={"Idempotency-Key": "m-1"},
        ),
        409,
        "idempotency_conflict",
    )
    assert body["details"]["note_id"] == first["note_id"]
    _problem(
        c.post(
            "/v1/beings/Eve/notes",
            json={"text": scene(), "idempotency_key": "a"},
            headers={"Idempotency-Key": "b"},
        ),
        422,
        "invalid_input",
    )
    bad = _problem(
        c.post(
            "/v1/beings/Eve/notes", json={"text": json.dumps({"action": "x", "importance": 3, "mood": 1})}
        ),
        422,
        "invalid_scene",
    )
    assert {e["field"] for e in bad["errors"]} >= {"actors", "when", "importance", "mood"}
    prose = _ok(c.post("/v1/beings/Eve/notes", json={"text": "felt great after the run"}), 201)
    assert prose["parsed"] is False and prose["parse_error"]
    todo = _ok(c.post("/v1/beings/Eve/notes", json={"kind": "todo", "text": "Renew the passport"}), 201)
    assert todo["kind"] == "todo" and todo["parsed"] is None
    _problem(c.post("/v1/beings/Eve/notes", json={"kind": "poem", "text": "x"}), 422, "invalid_input")
    _problem(c.post("/v1/beings/Eve/notes", json={"text": "x", "colour": "red"}), 422, "invalid_input")
    _problem(c.post("/v1/beings/Eve/notes", json={}), 422, "invalid_input")

    unread = _ok(c.get("/v1/beings/Eve/notes", params={"kind": "todo", "unread": "true"}))
    assert [n["id"] for n in unread] == [todo["note_id"]]
    assert (
        _ok(c.patch(f"/v1/beings/Eve/notes/{todo['note_id']}", json={"read": True}))["note_id"]
        == todo["note_id"]
    )
    assert _ok(c.get("/v1/beings/Eve/notes", params={"kind": "todo", "unread": "true"})) == []
    _ok(c.patch(f"/v1/beings/Eve/notes/{todo['note_id']}", json={"enabled": False}))
    _problem(c.patch(f"/v1/beings/Eve/notes/{todo['note_id']}", json={}), 422, "invalid_input")
    _problem(c.patch(f"/v1/beings/Eve/notes/{uuid.uuid4()}", json={"read": True}), 404, "not_found")
    state = _ok(c.get(f"/v1/beings/Eve/notes/{todo['note_id']}"))
    assert state["read"] is True and state["enabled"] is False and state["latest_version"] == 3
    assert _ok(c.get(f"/v1/beings/Eve/notes/{todo['note_id']}", params={"as_of": "1"}))["read"] is False
    history = _ok(c.get(f"/v1/beings/Eve/notes/{todo['note_id']}/history"))
    assert [h["type"] for h in history] == ["Note.Noted", "Note.MarkedRead", "Note.Disabled"]
    all_notes = _ok(c.get("/v1/beings/Eve/notes"))
    assert len(all_notes) == 3  # the refused ones wrote nothing


def test_batches_are_all_or_nothing_and_bounded(world: World) -> None:
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Finn"}), 201)
    batch = {"notes": [{"text": scene(action=f"Walk {i}"), "idempotency_key": f"w-{i}"} for i in range(3)]}
    taken = _ok(c.post("/v1/beings/Finn/notes/batch", json=batch), 201)
    assert len(taken["notes"]) == 3 and taken["position"] is not None
    replay = _ok(c.post("/v1/beings/Finn/notes/batch", json=batch), 200)
    assert [n["note_id"] for n in replay["notes"]] == [n["note_id"] for n in taken["notes"]]
    assert all(n["duplicate"] for n in replay["notes"]) and replay["position"] is None
    broken = {"notes": [{"text": scene(action="Fine")}, {"text": json.dumps({"action": "x"})}]}
    body = _problem(c.post("/v1/beings/Finn/notes/batch", json=broken), 422, "invalid_scene")
    assert body["details"]["index"] == 1 and body["errors"]
    too_many = {"notes": [{"kind": "todo", "text": "x"}] * 1001}
    _problem(c.post("/v1/beings/Finn/notes/batch", json=too_many), 422, "invalid_input")
    _problem(c.post("/v1/beings/Finn/notes/batch", json={"notes": []}), 422, "invalid_input")
    assert len(_ok(c.get("/v1/beings/Finn/notes"))) == 3


def test_body_limits_and_malformed_bodies(world: World) -> None:
    c = world.as_admin
    before = len(_ok(c.get("/v1/beings/Aria/notes")))
    big_note = "x" * (64 * 1024 + 1)
    _problem(
        c.post("/v1/beings/Aria/notes", json={"kind": "todo", "text": big_note}), 413, "payload_too_large"
    )
    huge = {"kind": "todo", "text": "x" * (1024 * 1024)}
    body = _problem(c.post("/v1/beings/Aria/notes", json=huge), 413, "payload_too_large")
    assert body["details"]["limit"] == 1024 * 1024

    def chunks() -> Iterator[bytes]:
        yield b'{"kind": "todo", "text": "'
        for _ in range(80):
            yield b"y" * 16384
        yield b'"}'

    streamed = c.post("/v1/beings/Aria/notes", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in streamed.request.headers
    _problem(streamed, 413, "payload_too_large")
    _problem(
        c.post("/v1/beings/Aria/notes", content=b'{"text": ', headers={"Content-Type": "application/json"}),
        400,
        "invalid_json",
    )
    _problem(
        c.post("/v1/beings/Aria/recall", content=b"[1, 2", headers={"Content-Type": "application/json"}), 400
    )
    _problem(
        c.post("/v1/beings/Aria/notes", content=b"text=hello", headers={"Content-Type": "text/plain"}), 415
    )
    assert len(_ok(c.get("/v1/beings/Aria/notes"))) == before


# -- memory ---------------------------------------------------------------------------------------


def test_recall_search_query_and_context(world: World) -> None:
    c = world.client(world.tokens["Aria"])
    recalled = _ok(c.post("/v1/beings/Aria/recall", json={"query": "planted tomatoes with Mina"}))
    assert recalled["text"].startswith("<memory>") and "tomatoes" in recalled["text"]
    assert recalled["nodes"] and recalled["position"] is not None
    again = _ok(c.post("/v1/beings/Aria/recall", json={"query": "planted tomatoes with Mina"}))
    # each node as the recall left it: its count after the increment
    assert [n["reactivation_count"] for n in again["nodes"]] == [
        n["reactivation_count"] + 1 for n in recalled["nodes"]
    ]
    _problem(c.post("/v1/beings/Aria/recall", json={"query": ""}), 422, "invalid_input")
    _problem(c.post("/v1/beings/Aria/recall", json={"query": "x" * 4001}), 422, "invalid_input")
    _problem(c.post("/v1/beings/Aria/recall", json={"query": "   "}), 422, "invalid_input")

    found = _ok(c.get("/v1/beings/Aria/search", params={"q": "tomatoes ridge"}))
    assert len(found["nodes"]) == 2
    assert _ok(c.get("/v1/beings/Aria/search", params={"q": "tomatoes ridge", "mode": "and"}))["nodes"] == []
    assert len(_ok(c.get("/v1/beings/Aria/search", params={"q": "climbing", "limit": 1}))["nodes"]) == 1
    three = {"q": "tomatoes ridge bread", "limit": 2}
    first = _ok(c.get("/v1/beings/Aria/search", params=three))
    assert (len(first["nodes"]), first["total"], first["reactivated"]) == (2, 3, 3) and first["cursor"]
    rest = _ok(c.get("/v1/beings/Aria/search", params={**three, "cursor": first["cursor"]}))
    assert (len(rest["nodes"]), rest["total"], rest["reactivated"], rest["cursor"]) == (1, 3, 0, None)
    assert {n["id"] for n in first["nodes"] + rest["nodes"]} == set(world.nodes["Aria"])
    _problem(
        c.get("/v1/beings/Aria/search", params={"q": "bread", "cursor": first["cursor"]}),
        422,
        "invalid_input",
    )
    _problem(c.get("/v1/beings/Aria/search", params={"q": "bread", "limit": 101}), 422, "invalid_input")
    _problem(c.get("/v1/beings/Aria/search", params={"q": "x", "mode": "xor"}), 422, "invalid_input")
    _problem(c.get("/v1/beings/Aria/search"), 422, "invalid_input")
    _problem(c.get("/v1/beings/Aria/search", params={"q": " ".join(["w"] * 21)}), 422, "invalid_input")

    ranked = _ok(c.post("/v1/beings/Aria/query", json={"query": "sourdough bread", "k": 2}))
    assert len(ranked["nodes"]) == 2 and "bread" in ranked["nodes"][0]["action"]
    audit = _ok(
        c.post("/v1/beings/Aria/query", json={"query": "bread", "reactivate": False, "profile": "lexical"})
    )
    assert audit["position"] is None and audit["nodes"]
    _problem(
        c.post("/v1/beings/Aria/query", json={"query": "bread", "profile": "nope"}), 422, "invalid_input"
    )
    _problem(c.post("/v1/beings/Aria/query", json={"query": "bread", "k": 0}), 422, "invalid_input")

    for kind, text in (("tool", "calendar: books appointments"), ("map", "Greenhouse: behind the house")):
        assert _ok(c.post("/v1/beings/Aria/notes", json={"kind": kind, "text": text}), 201)["kind"] == kind
    context = _ok(c.get("/v1/beings/Aria/context"))
    assert context["system_prompt"]["soul"] == "Aria is curious and warm."
    assert "Aria is curious and warm." in context["text"] and len(context["recent_nodes"]) == len(MEMORIES)
    assert context["system_prompt"]["tools"] == ["calendar: books appointments"]
    assert context["system_prompt"]["map"] == ["Greenhouse: behind the house"]
    assert context["system_text"].endswith(
        "## Tools you can use\n- calendar: books appointments\n\n## Your map\n- Greenhouse: behind the house"
    )
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"]
    assert context["messages"][0]["content"].startswith("# What is on your plate")
    assert context["text"] == "\n\n".join(
        (context["system_text"], context["messages"][0]["content"], context["recent_text"])
    )
    # The context pack (ADR 0049): the newest notes, or those that match a query, never scenes.
    pack = _ok(c.get("/v1/beings/Aria/pack", params={"limit": 1}))
    assert pack["text"] == "## Memory Context\n\n[map] Greenhouse: behind the house"
    ranked_pack = _ok(c.get("/v1/beings/Aria/pack", params={"query": "calendar appointments"}))
    assert ranked_pack["notes"][0]["text"] == "calendar: books appointments"
    _problem(c.get("/v1/beings/Aria/pack", params={"limit": 0}), 422, "invalid_input")


def test_nodes_clusters_pins_and_patrol_runs(world: World) -> None:
    c = world.client(world.tokens["Aria"])
    nodes = _ok(c.get("/v1/beings/Aria/nodes", params={"status": ["active", "dying"], "limit": 10}))
    assert {n["id"] for n in nodes} == set(world.nodes["Aria"])
    node = nodes[0]["id"]
    state = _ok(c.get(f"/v1/beings/Aria/nodes/{node}"))
    assert state["kind"] == "node" and state["id"] == node
    first = _ok(c.get(f"/v1/beings/Aria/nodes/{node}", params={"as_of": "1"}))
    assert first["version"] == 1 and first["latest_version"] >= 1
    assert _ok(c.get(f"/v1/beings/Aria/nodes/{node}/history"))[0]["type"] == "MemoryNode.Created"
    assert _ok(c.put(f"/v1/beings/Aria/nodes/{node}/pin"))["details"]["pinned"] is True
    assert _ok(c.delete(f"/v1/beings/Aria/nodes/{node}/pin"))["details"]["pinned"] is False
    _problem(c.put(f"/v1/beings/Aria/nodes/{uuid.uuid4()}/pin"), 404, "not_found")
    _problem(c.get("/v1/beings/Aria/nodes/not-a-uuid"), 422, "invalid_input")
    _problem(c.get(f"/v1/beings/Aria/widgets/{uuid.uuid4()}"), 422, "invalid_input")

    clusters = _ok(c.get("/v1/beings/Aria/clusters"))
    assert {x["name"] for x in clusters if x["is_root"]} == {"Business", "Private"}
    home = nodes[0]["cluster_id"]
    assert _ok(c.get(f"/v1/beings/Aria/clusters/{home}"))["kind"] == "cluster"
    assert _ok(c.get(f"/v1/beings/Aria/clusters/{home}/history"))[0]["type"] == "Cluster.Created"
    members = _ok(c.post(f"/v1/beings/Aria/clusters/{home}/recall"))
    assert node in {n["id"] for n in members["nodes"]}
    _problem(c.post(f"/v1/beings/Aria/clusters/{uuid.uuid4()}/recall"), 404, "not_found")

    runs = _ok(c.get("/v1/beings/Aria/patrol-runs"))
    assert runs[0]["cycle"] >= 1 and "notes_to_nodes" in runs[0]["steps"]
    run = _ok(c.get(f"/v1/beings/Aria/patrol-runs/{runs[0]['id']}"))
    assert run["kind"] == "patrol-run"
    assert (
        _ok(c.get(f"/v1/beings/Aria/patrol-runs/{runs[0]['id']}/history"))[0]["type"] == "PatrolRun.Started"
    )
    note = world.notes["Aria"][0]
    assert _ok(c.get(f"/v1/beings/Aria/notes/{note}"))["parse_status"] == "processed"
    # An id of the wrong kind is not found, like any unknown id.
    _problem(c.get(f"/v1/beings/Aria/clusters/{node}"), 404, "not_found")


def test_patrol_with_a_per_request_llm_key(world: World) -> None:
    """BYOK: the key reaches the LLM server for that patrol only, and never a log line or the log."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Cleo"}), 201)
    _ok(c.post("/v1/beings/Cleo/notes", json={"text": scene()}), 201)
    key = "sk-test-" + secrets.token_hex(16)
    fake = world.fake
    fake.requests.clear()
    fake.first_request.clear()
    fake.gate.clear()  # hold the LLM's answers: the patrol stays in flight
    result: dict[str, Any] = {}

    def run() -> None:
        with world.client(world.admin, **{"X-LLM-Key": key, "X-LLM-Provider": "openai"}) as byok:
            result["response"] = byok.post("/v1/beings/Cleo/patrol", json={"dry_run": False})

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert fake.first_request.wait(30), "the patrol never called the LLM"
        _problem(c.post("/v1/beings/Cleo/patrol"), 409, "patrol_running")
    finally:
        fake.gate.set()
        thread.join(60)
    report = _ok(result["response"])
    assert report["llm"] and report["llm"].startswith("openai:")
    assert fake.requests and all(r["authorization"] == f"Bearer {key}" for r in fake.requests)
    assert {r["path"] for r in fake.requests} == {"/v1/chat/completions"}
    tasks = {r["body"]["response_format"]["json_schema"]["name"] for r in fake.requests}
    assert "write_diary" in tasks
    being = _ok(c.get("/v1/beings/Cleo"))
    assert being["think_md"].startswith("- Water the tomatoes")
    assert DIARY["diary"].splitlines()[0] in next(iter(being["diary"].values()))

    asked = len(fake.requests)
    _ok(c.post("/v1/beings/Cleo/notes", json={"text": scene(action="Watered the tomatoes")}), 201)
    again = _ok(c.post("/v1/beings/Cleo/patrol"))
    assert again["llm"] is None and len(fake.requests) == asked  # the key was not kept
    dry = _ok(c.post("/v1/beings/Cleo/patrol", json={"dry_run": True}))
    assert dry["dry_run"] is True
    _problem(
        c.post("/v1/beings/Cleo/patrol", headers={"X-LLM-Key": key, "X-LLM-Provider": "gemini"}),
        422,
        "invalid_input",
    )

    log = json.dumps(_ok(c.get("/v1/admin/log", params={"being": "Cleo", "limit": 1000})))
    assert "openai:" in log and key not in log
    assert key not in world.server.log()


# -- tenancy ----------------------------------------------------------------------------------------


def _same_as_missing(c: httpx.Client, method: str, path: str, ref: str, missing: str, **kw: Any) -> None:
    """`path` with `ref` answers exactly like the same path with `missing` (an id or name that does not exist)."""
    got = _problem(c.request(method, path.format(ref), **kw), 404)
    want = _problem(c.request(method, path.format(missing), **kw), 404)
    assert without_cid(got) == json.loads(json.dumps(without_cid(want)).replace(missing, ref))


def test_a_being_token_cannot_see_another_being(world: World) -> None:
    c = world.client(world.tokens["Aria"])
    bo_id = world.ids["Bo"]
    ghost = str(uuid.uuid4())
    probes: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/v1/beings/{}", {}),
        ("GET", "/v1/beings/{}/history", {}),
        ("GET", "/v1/beings/{}/context", {}),
        ("GET", "/v1/beings/{}/nodes", {}),
        ("GET", "/v1/beings/{}/clusters", {}),
        ("GET", "/v1/beings/{}/notes", {}),
        ("GET", "/v1/beings/{}/patrol-runs", {}),
        ("GET", "/v1/beings/{}/search", {"params": {"q": "tomatoes"}}),
        ("POST", "/v1/beings/{}/recall", {"json": {"query": "tomatoes"}}),
        ("POST", "/v1/beings/{}/query", {"json": {"query": "tomatoes"}}),
        ("POST", "/v1/beings/{}/notes", {"json": {"text": scene()}}),
        ("POST", "/v1/beings/{}/patrol", {}),
        ("PUT", "/v1/beings/{}/soul", {"json": {"soul": "mine now"}}),
    ]
    for method, path, kw in probes:
        _same_as_missing(c, method, path, "Bo", "Nobody", **kw)
        _same_as_missing(c, method, path, bo_id, ghost, **kw)
    bo_node, bo_note = world.nodes["Bo"][0], world.notes["Bo"][0]
    bo_cluster = _ok(world.as_admin.get("/v1/beings/Bo/nodes"))[0]["cluster_id"]
    item_probes: list[tuple[str, str, str, dict[str, Any]]] = [
        ("GET", "/v1/beings/Aria/nodes/{}", bo_node, {}),
        ("GET", "/v1/beings/Aria/nodes/{}/history", bo_node, {}),
        ("GET", "/v1/beings/Aria/nodes/{}", bo_node, {"params": {"as_of": "1"}}),
        ("PUT", "/v1/beings/Aria/nodes/{}/pin", bo_node, {}),
        ("GET", "/v1/beings/Aria/clusters/{}", bo_cluster, {}),
        ("GET", "/v1/beings/Aria/clusters/{}/history", bo_cluster, {}),
        ("POST", "/v1/beings/Aria/clusters/{}/recall", bo_cluster, {}),
        ("GET", "/v1/beings/Aria/notes/{}", bo_note, {}),
        ("PATCH", "/v1/beings/Aria/notes/{}", bo_note, {"json": {"read": True}}),
    ]
    for method, path, ref, kw in item_probes:
        _same_as_missing(c, method, path, ref, ghost, **kw)
    assert _ok(c.get("/v1/beings/Aria/nodes", params={"cluster_id": bo_cluster})) == []

    # Bo holds the very same memories: Aria's reads find Aria's copies, never Bo's.
    mine, theirs = set(world.nodes["Aria"]), set(world.nodes["Bo"])
    for response in (
        c.post("/v1/beings/Aria/recall", json={"query": "Planted tomatoes with Mina in the garden"}),
        c.get("/v1/beings/Aria/search", params={"q": "tomatoes ridge sourdough"}),
        c.post("/v1/beings/Aria/query", json={"query": "tomatoes ridge sourdough", "k": 100}),
        c.post("/v1/beings/Aria/query", json={"query": "Mina Lena neighbours", "include_dead": True}),
    ):
        found = {n["id"] for n in _ok(response)["nodes"]}
        assert found and found <= mine and not found & theirs
    assert {n["id"] for n in _ok(c.get("/v1/beings/Aria/nodes"))} == mine
    assert _ok(world.client(world.tokens["Bo"]).get("/v1/beings/Bo/context"))["being"] == "Bo"


# -- admin ----------------------------------------------------------------------------------------


def test_admin_projections_log_and_tokens(world: World) -> None:
    c = world.as_admin
    status = _ok(c.get("/v1/admin/projections"))
    assert {"beings", "notes", "memory", "patrol_runs", "vectors", "tokens"} <= {s["name"] for s in status}
    before = next(s for s in status if s["name"] == "tokens")["generation"]
    rebuilt = _ok(c.post("/v1/admin/projections/tokens/rebuild"))
    assert rebuilt == {"projection": "tokens", "generation": before + 1}
    assert _ok(c.get("/v1/beings/Aria/context"))  # the admin token still verifies after the rebuild
    _ok(c.post("/v1/admin/projections/memory/rebuild"))
    assert {n["id"] for n in _ok(c.get("/v1/beings/Aria/nodes"))} == set(world.nodes["Aria"])
    _problem(c.post("/v1/admin/projections/nope/rebuild"), 404, "not_found")

    entries = _ok(c.get("/v1/admin/log", params={"limit": 5}))
    assert [e["position"] for e in entries] == sorted(e["position"] for e in entries) and len(entries) == 5
    later = _ok(c.get("/v1/admin/log", params={"after": entries[-1]["position"], "limit": 1}))
    assert later[0]["position"] > entries[-1]["position"]
    aria = _ok(c.get("/v1/admin/log", params={"being": "Aria", "limit": 1000}))
    assert aria and {e["being_id"] for e in aria} == {world.ids["Aria"]}
    _problem(c.get("/v1/admin/log", params={"limit": 0}), 422, "invalid_input")

    listed = _ok(c.get("/v1/admin/tokens"))
    assert all("token" not in t for t in listed)
    assert {t["being"] for t in listed if t["scope"] == "being"} >= {"Aria", "Bo"}
    _problem(c.post("/v1/admin/tokens", json={"being": "Aria", "admin": True}), 422, "invalid_input")
    _problem(c.post("/v1/admin/tokens", json={"being": "Nobody"}), 404, "not_found")
    extra = _ok(c.post("/v1/admin/tokens", json={"admin": True, "label": "ops"}), 201)
    assert _ok(world.client(extra["token"]).get("/v1/admin/projections"))
    assert (
        _ok(c.delete(f"/v1/admin/tokens/{extra['id']}", params={"reason": "done"}))["details"][
            "already_revoked"
        ]
        is False
    )
    assert _ok(c.delete(f"/v1/admin/tokens/{extra['id']}"))["details"]["already_revoked"] is True
    _problem(c.delete(f"/v1/admin/tokens/{uuid.uuid4()}"), 404, "not_found")
    assert any(
        t["id"] == extra["id"] and t["revoked"] for t in _ok(c.get("/v1/admin/tokens?include_revoked=true"))
    )
    assert wait_until(lambda: world.client(extra["token"]).get("/v1/beings").status_code == 401, timeout=5)


# -- protocol ---------------------------------------------------------------------------------------


def test_unknown_routes_methods_and_request_ids(world: World) -> None:
    c = world.as_admin
    _problem(c.get("/v1/nothing-here"), 404, "not_found")
    _problem(world.client().get("/elsewhere"), 404, "not_found")
    r = c.delete("/v1/beings")
    _problem(r, 405, "method_not_allowed")
    assert "GET" in r.headers["allow"] and "POST" in r.headers["allow"]

    r = c.get("/v1/beings/Aria/context", headers={"X-Request-Id": "req-1234.abc"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "req-1234.abc"
    r = c.get("/v1/beings/Nobody", headers={"X-Request-Id": "not valid; <script>"})
    generated = r.headers["x-request-id"]
    assert len(generated) == 32 and r.json()["correlation_id"] == generated

    def logged() -> bool:
        return any(line.get("correlation_id") == "req-1234.abc" for line in world.server.log_lines())

    assert wait_until(logged)
    [line] = [x for x in world.server.log_lines() if x.get("correlation_id") == "req-1234.abc"]
    assert line["event"] == "request" and line["command"] == "context" and line["being"] == "Aria"
    assert line["being_id"] == world.ids["Aria"] and line["status"] == 200 and line["duration_ms"] >= 0
    assert line["route"] == "/v1/beings/{being}/context" and line["method"] == "GET"


def test_consistency_timeout_is_503(world: World) -> None:
    c = world.as_admin
    lock = world.view_lock("notes")
    assert lock.try_acquire()
    try:
        _ok(c.post("/v1/beings/Aria/notes", json={"kind": "todo", "text": "Call Mina"}), 201)
        r = c.get("/v1/beings/Aria/notes")
        _problem(r, 503, "consistency_timeout")
        assert r.headers["retry-after"] == "1"
    finally:
        lock.release()
    assert any(n["text"] == "Call Mina" for n in _ok(c.get("/v1/beings/Aria/notes")))


def test_secrets_never_reach_the_server_log(world: World) -> None:
    text = world.server.log()
    for token in (world.admin, *world.tokens.values()):
        assert token not in text
    assert "Authorization" not in text and "authorization" not in text
    requests = [x for x in world.server.log_lines() if x.get("event") == "request"]
    assert requests and all(
        {"correlation_id", "command", "duration_ms", "status"} <= set(x) for x in requests
    )


def test_a_notes_lifecycle_over_the_wire(world: World) -> None:
    """Supersede, chain, merge and the admin sweep through a real server (ADR 0048)."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Lia"}), 201)
    a, b, d = (
        _ok(c.post("/v1/beings/Lia/notes", json={"kind": "knowledge", "text": t}), 201)["note_id"]
        for t in ("floor 3", "floor 5", "floor 7")
    )
    assert _ok(c.post(f"/v1/beings/Lia/notes/{a}/supersede", json={"by": b}))["old"] == a
    chain = _ok(c.get(f"/v1/beings/Lia/notes/{a}/chain"))
    assert [link["id"] for link in chain["replaced_by"]] == [b]
    _problem(c.post(f"/v1/beings/Lia/notes/{b}/supersede", json={"by": a}), 409, "invalid_transition")
    merged = _ok(c.post("/v1/beings/Lia/notes/merge", json={"ids": [b, d], "llm": False}), 201)
    assert merged["method"] == "concatenation" and merged["sources"] == [b, d]
    assert set(_ok(c.post("/v1/admin/notes/sweep"))) >= {"expired", "skipped", "batches", "at"}


def test_sessions_over_the_wire(world: World) -> None:
    """Messages taken in another process (the Python API on the same data); their sessions read
    through the server (ADR 0053)."""
    from engram.services.bootstrap import bootstrap
    from engram.services.config import Settings
    from tests.session_support import CHAT, chat

    settings = Settings(
        data_dir=Path(world.env["ENGRAM_DATA_DIR"]),
        database_url=world.database_url,
        embedder="hashing",
        llm="none",
    )
    with bootstrap(settings) as e:
        [first, *_] = chat(e, "Bo", "lena", CHAT[:4], prefix="wire")
    c = world.as_admin
    listed = _ok(c.get("/v1/beings/Bo/sessions", params={"user": "lena"}))
    assert [(s["id"], s["turns"], s["ended_at"]) for s in listed["sessions"]] == [(first.session_id, 4, None)]
    shown = _ok(c.get(f"/v1/beings/Bo/sessions/{first.session_id}"))
    assert [m["id"] for m in shown["messages"]] == ["wire0", "wire1", "wire2", "wire3"]
    _problem(c.get(f"/v1/beings/Aria/sessions/{first.session_id}"), 404, "not_found")


def test_messages_and_journals_over_the_wire(world: World) -> None:
    """A chat taken through the server, searched, and its journal read and written (ADR 0052, 0054, 0055)."""
    c = world.as_admin
    lines = [
        {
            "id": "w1",
            "user": "mina",
            "text": "The tomatoes are finally red.",
            "at": "2026-10-29T18:02:00+00:00",
        },
        {
            "id": "w2",
            "user": "mina",
            "role": "assistant",
            "text": "Shall I remind you on Saturday?",
            "at": "2026-10-29T18:03:00+00:00",
        },
    ]
    taken = _ok(c.post("/v1/beings/Bo/messages", json={"messages": lines}), 201)
    assert [m["number"] for m in taken["messages"]] == [1, 2]
    assert _ok(c.post("/v1/beings/Bo/messages", json=lines[0]))["duplicate"] is True
    hits = _ok(c.get("/v1/beings/Bo/messages/search", params={"q": "tomatoes"}))["hits"]
    assert [h["id"] for h in hits] == ["w1"]
    day = c.get("/v1/beings/Bo/journal/2026-10-29")
    assert day.status_code == 200 and "mina: The tomatoes are finally red." in day.text
    memory = c.get("/v1/beings/Bo/memory.md")
    assert memory.status_code == 200 and "## Recent journal highlights" in memory.text
    assert _ok(c.post("/v1/beings/Bo/memory.md/refresh"))


def test_facts_spaces_and_entities_over_the_wire(world: World) -> None:
    """Every fact route through the server: write, list, show, history, pin, archive, lore, spaces,
    entity merges, search, the slice, entities, extraction (ADR 0056–0059)."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Fay"}), 201)
    fact = {
        "subject": "mina",
        "text": "Mina lives in Austin",
        "memory_key": "profile|person|mina|home",
        "entity_refs": ["person:mina", "place:austin"],
        "importance": 2,
    }
    stated = _ok(c.post("/v1/beings/Fay/facts", json=fact), 201)
    fact_id = stated["fact_id"]
    moved = _ok(c.post("/v1/beings/Fay/facts", json={**fact, "text": "Mina lives in Denver"}), 201)
    assert moved["outcome"] == "revised" and moved["version"] == 2
    assert [f["text"] for f in _ok(c.get("/v1/beings/Fay/facts"))] == ["Mina lives in Denver"]
    assert (
        _ok(c.get(f"/v1/beings/Fay/facts/{fact_id}", params={"as_of": 1}))["text"] == "Mina lives in Austin"
    )
    assert len(_ok(c.get(f"/v1/beings/Fay/facts/{fact_id}/history"))) >= 2
    _ok(c.post(f"/v1/beings/Fay/facts/{fact_id}/pin"))
    _ok(c.post(f"/v1/beings/Fay/facts/{fact_id}/unpin"))
    other = _ok(c.post("/v1/beings/Fay/facts", json={"subject": "mina", "text": "Mina keeps bees"}), 201)
    _ok(c.post(f"/v1/beings/Fay/facts/{other['fact_id']}/archive"))
    _ok(c.post("/v1/beings/Fay/lore", json={"line": "the harbour floods in spring"}), 201)
    _ok(c.post("/v1/admin/spaces", json={"name": "kin", "beings": ["Fay"]}), 201)
    _ok(c.post("/v1/admin/spaces/kin/members", json={"being": "Bo"}))
    assert "kin" in [s["name"] for s in _ok(c.get("/v1/admin/spaces"))]
    assert [s["name"] for s in _ok(c.get("/v1/beings/Fay/spaces"))] == ["kin"]
    _ok(c.delete("/v1/beings/Bo/spaces/kin"))
    _ok(c.post("/v1/beings/Fay/entities/merge", json={"alias": "person:mina_k", "into": "person:mina"}))
    _ok(c.post("/v1/beings/Fay/entities/unmerge", json={"alias": "person:mina_k"}))
    hits = _ok(c.get("/v1/beings/Fay/facts/search", params={"q": "where does Mina live"}))
    assert "Mina lives in Denver" in [h["text"] for h in hits["hits"]]
    assert _ok(c.get("/v1/beings/Fay/slice", params={"user": "mina"}))["user_facts"]
    assert "person:mina" in [e["ref"] for e in _ok(c.get("/v1/beings/Fay/entities"))]
    assert _ok(c.get("/v1/beings/Fay/entities/person:mina"))["ref"] == "person:mina"
    assert set(_ok(c.post("/v1/beings/Fay/facts/extract"))) >= {"messages"}


def test_sleep_over_the_wire(world: World) -> None:
    """Every sleep route through the server (ADR 0060): the schedule, sleep, a deferred wake, the
    mode, dream ticks; bad input answers 422 and a second wake of an awake being 409."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Sol"}), 201)
    sched = _ok(c.put("/v1/beings/Sol/sleep/schedule", json={"start_hour": 23, "duration_hours": 5}))
    assert sched["details"]["schedule"]["enabled"] is True
    assert c.put("/v1/beings/Sol/sleep/schedule", json={"start_hour": 24}).status_code == 422
    assert c.put("/v1/beings/Sol/sleep/schedule", json={"bedtime": 1}).status_code == 422
    asleep = _ok(c.post("/v1/beings/Sol/sleep", json={"hours": 2, "reason": "maintenance"}))
    assert asleep["details"]["mode"] == "asleep" and asleep["details"]["phase"] == "compacting"
    assert c.post("/v1/beings/Sol/sleep").status_code == 409
    mode = _ok(c.get("/v1/beings/Sol/mode"))
    assert mode["mode"] == "asleep" and mode["recent"][0]["reason"] == "maintenance"
    dreamt = _ok(c.post("/v1/beings/Sol/dream", json={"ticks": 3}))
    assert dreamt["ticks"] >= 1 and dreamt["napped"] is False
    assert _ok(c.post("/v1/beings/Sol/wake", json={"reason": "morning"}))["details"]["outcome"] == "woke"
    again = c.post("/v1/beings/Sol/wake")
    assert again.status_code == 409 and "awake already" in again.text
    assert c.post("/v1/beings/Sol/dream", json={"ticks": 0}).status_code == 422


def test_profiles_and_reflections_over_the_wire(world: World) -> None:
    """Entity profiles and reflections (ADR 0064, 0065): built by dream ticks, read by ref (an alias
    reads as its entity), listed; a bad ref answers 422, an unknown one 404."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Pia"}), 201)
    _ok(c.post("/v1/beings/Pia/facts", json={"subject": "mina", "text": "Mina keeps bees"}), 201)
    _ok(c.post("/v1/beings/Pia/dream", json={"ticks": 3}))
    listed = _ok(c.get("/v1/beings/Pia/profiles"))
    assert [p["ref"] for p in listed] == ["person:mina"]
    mina = _ok(c.get("/v1/beings/Pia/profiles/person:mina"))
    assert mina["observations"][0]["text"] == "Mina keeps bees"
    assert mina["relationship"]["state"] == "stranger"
    assert c.get("/v1/beings/Pia/profiles/Mina!").status_code == 422
    assert c.get("/v1/beings/Pia/profiles/person:nobody").status_code == 404
    found = _ok(c.get("/v1/beings/Pia/reflections"))
    assert found["reflections"] == [] and found["threshold"] == 150 and found["gathered"] > 0


def test_links_over_the_wire(world: World) -> None:
    """`GET /v1/beings/{being}/links` (ADR 0062): the links with their scores; a bad node is 422."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Lin"}), 201)
    listed = _ok(c.get("/v1/beings/Lin/links"))
    assert listed["links"] == [] and listed["memory_id"] is None
    node = "00000000-0000-0000-0000-000000000001"
    assert _ok(c.get(f"/v1/beings/Lin/links?node={node}&limit=5"))["memory_id"] == node
    bad = c.get("/v1/beings/Lin/links?node=nope")
    assert bad.status_code == 422 and "node" in bad.text
    assert c.get("/v1/beings/Lin/links?limit=0").status_code == 422
    found = _ok(
        c.post("/v1/beings/Lin/query", json={"query": "anything", "links": True, "reactivate": False})
    )
    assert found["nodes"] == []
    assert c.post("/v1/beings/Lin/query", json={"query": "x", "links": "maybe"}).status_code == 422


def test_why_over_the_wire(world: World) -> None:
    """`GET /v1/beings/{being}/why/{kind}/{id}` (ADR 0068): the lineage tree; a being token reads only
    its being (another being's id is 404, as an unknown one); an unknown kind is 422."""
    c = world.client(world.tokens["Aria"])
    node, bo_node = world.nodes["Aria"][0], world.nodes["Bo"][0]
    found = _ok(c.get(f"/v1/beings/Aria/why/node/{node}"))
    assert found["tree"]["id"] == node and found["tree"]["events"][0]["type"] == "MemoryNode.Created"
    assert isinstance(found["tree"]["events"][0]["position"], int)
    assert _child_relations(found["tree"]) >= {"source note", "cluster"}
    _problem(c.get(f"/v1/beings/Aria/why/node/{bo_node}"), 404)
    _problem(c.get(f"/v1/beings/Aria/why/node/{uuid.uuid4()}"), 404)
    _problem(c.get(f"/v1/beings/Bo/why/node/{bo_node}"), 404)  # not Aria's token's being
    assert world.as_admin.get(f"/v1/beings/Bo/why/node/{bo_node}").status_code == 200
    assert c.get(f"/v1/beings/Aria/why/planet/{node}").status_code == 422


def _child_relations(tree: dict[str, Any]) -> set[str]:
    return {child["relation"] for child in tree["children"]}


def test_undo_over_the_wire(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """An admin undoes a patrol's consolidation (ADR 0072): dry run, undo, then a second undo is a 409."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Una"}), 201)
    walks = [
        scene(action="Walked the dog along the river"),
        scene(action="Walked the dog along the river again"),
    ]
    _ok(c.post("/v1/beings/Una/notes/batch", json={"notes": [{"text": t} for t in walks]}), 201)
    _ok(c.post("/v1/beings/Una/patrol"))  # no LLM: the nodes are made, nothing is merged
    nodes = _ok(c.get("/v1/beings/Una/nodes"))
    assert len(nodes) == 2 and nodes[0]["cluster_id"] == nodes[1]["cluster_id"]
    survivor, absorbed = nodes[0]["id"], nodes[1]["id"]
    merge = {
        "merges": [{"survivor": survivor, "absorbed": [absorbed], "reason": "same walk"}],
        "make_dead": [],
    }
    monkeypatch.setitem(ANSWERS, "consolidate_cluster", merge)
    byok = world.client(world.admin, **{"X-LLM-Key": "sk-test-undo", "X-LLM-Provider": "openai"})
    _ok(byok.post("/v1/beings/Una/patrol"))
    history = _ok(c.get(f"/v1/beings/Una/nodes/{survivor}/history"))
    [version] = [e["version"] for e in history if e["type"] == "MemoryNode.AbsorbedNodes"]
    decision = f"{survivor}@{version}"

    _problem(world.client(world.tokens["Aria"]).post(f"/v1/admin/undo/{decision}"), 403)
    plan = _ok(c.post(f"/v1/admin/undo/{decision}", json={"dry_run": True}))
    assert plan["applied"] is False and plan["steps"][0]["released"] == [absorbed]
    assert _ok(c.get(f"/v1/beings/Una/nodes/{absorbed}"))["status"] == "dead"
    done = _ok(c.post(f"/v1/admin/undo/{decision}", json={"reason": "two walks, not one"}))
    assert done["applied"] is True
    assert _ok(c.get(f"/v1/beings/Una/nodes/{absorbed}"))["status"] == "active"
    _problem(c.post(f"/v1/admin/undo/{decision}"), 409, "already_undone")
    _problem(c.post("/v1/admin/undo/nonsense"), 422, "invalid_input")


def test_forget_a_being_over_the_wire(world: World) -> None:
    """`POST /v1/admin/beings/{being}/forget` (ADR 0073): admin only; again, it says so."""
    c = world.as_admin
    _ok(c.post("/v1/beings", json={"name": "Gone"}), 201)
    token = _ok(c.post("/v1/admin/tokens", json={"being": "Gone", "label": "Gone's agent"}), 201)["token"]
    assert world.client(token).post("/v1/admin/beings/Gone/forget").status_code == 403
    done = _ok(c.post("/v1/admin/beings/Gone/forget"))
    assert done["already"] is False and done["counts"]["events"] >= 1 and done["position"] > 0
    assert _ok(c.post("/v1/admin/beings/Gone/forget"))["already"] is True
    assert c.get("/v1/beings/Gone/notes").status_code == 404


def test_forget_an_item_and_a_subject_over_the_wire(world: World) -> None:
    """ADR 0075/0076: a being's token forgets its own items (403 for another's); subjects: admin only."""
    c = world.as_admin
    for name in ("Ivy", "Jon"):
        _ok(c.post("/v1/beings", json={"name": name}), 201)
    token = _ok(c.post("/v1/admin/tokens", json={"being": "Ivy", "label": "Ivy's agent"}), 201)["token"]
    ivy = world.client(token)
    mine = _ok(ivy.post("/v1/beings/Ivy/notes", json={"kind": "todo", "text": "call the bank"}), 201)[
        "note_id"
    ]
    theirs = _ok(c.post("/v1/beings/Jon/notes", json={"kind": "todo", "text": "buy milk"}), 201)["note_id"]
    _problem(ivy.post(f"/v1/beings/Ivy/forget/note/{theirs}"), 403, "forbidden")
    done = _ok(ivy.post(f"/v1/beings/Ivy/forget/note/{mine}"))
    assert done["scope"] == "note" and done["already"] is False and done["counts"]["events"] >= 1
    assert _ok(ivy.post(f"/v1/beings/Ivy/forget/note/{mine}"))["already"] is True
    # A note may be named by the caller's idempotency key: none is "nonsense". A fact has no such id.
    _problem(ivy.post("/v1/beings/Ivy/forget/note/nonsense"), 404, "not_found")
    _problem(ivy.post("/v1/beings/Ivy/forget/fact/nonsense"), 422, "invalid_input")
    line = {"id": "w1", "user": "zed", "text": "zed was here", "at": "2026-03-01T09:00:00Z"}
    _ok(ivy.post("/v1/beings/Ivy/messages", json=line), 201)
    assert ivy.post("/v1/admin/beings/Ivy/forget-subject", params={"user": "zed"}).status_code == 403
    gone = _ok(c.post("/v1/admin/beings/Ivy/forget-subject", params={"user": "zed"}))
    assert gone["scope"] == "subject" and gone["counts"]["keys"] >= 2
    assert _ok(c.post("/v1/admin/beings/Ivy/forget-subject", params={"user": "zed"}))["already"] is True


def test_verify_over_the_wire(world: World) -> None:
    """`GET /v1/admin/verify` (ADR 0069): admins only; the chain of this server's log is whole."""
    _problem(world.client(world.tokens["Aria"]).get("/v1/admin/verify"), 403)
    whole = _ok(world.as_admin.get("/v1/admin/verify"))
    assert whole["ok"] is True and whole["broken_at"] is None and whole["checked"] > 0
    assert isinstance(whole["head_position"], int) and len(whole["head_hash"]) == 64


def test_keys_seal_over_the_wire(world: World) -> None:
    """`POST /v1/admin/keys/seal` (ADR 0095): admins only; this server's log has nothing to seal."""
    _problem(world.client(world.tokens["Aria"]).post("/v1/admin/keys/seal", params={"dry_run": True}), 403)
    dry = _ok(world.as_admin.post("/v1/admin/keys/seal", params={"being": "Aria", "dry_run": True}))
    assert dry["dry_run"] is True and dry["nothing_to_seal"] is True and dry["counts"]["events"] == 0
    done = _ok(world.as_admin.post("/v1/admin/keys/seal"))
    assert done["dry_run"] is False and done["nothing_to_seal"] is True and done["position"] is None
    _problem(world.as_admin.post("/v1/admin/keys/seal", params={"being": "Nobody"}), 404)


def test_every_route_answered_successfully(world: World) -> None:
    """Runs last: every route of the API served at least one 2xx in this module's tests."""
    spec = _ok(world.client().get("/openapi.json"))
    routes = {
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method in ops
        if path.startswith("/v1/")
    }
    served = {
        (x["method"], x["route"])
        for x in world.server.log_lines()
        if x.get("event") == "request" and 200 <= x.get("status", 0) < 300
    }
    assert routes - served == set()


# -- a second server: development mode, rate limits --------------------------------------------------


def test_no_auth_needs_loopback_and_rate_limits_apply(tmp_path: Path) -> None:
    env = base_env(tmp_path / "data")
    refused = cli(env, "serve", "--no-auth", "--host", "0.0.0.0", ok=False)
    assert refused.returncode == 2 and "loopback" in refused.stderr
    with running_server(
        env, tmp_path / "dev.log", "--no-auth", "--rate-limit", "0.5", "--rate-burst", "3"
    ) as s:
        c = httpx.Client(base_url=s.url, timeout=30)
        assert _ok(c.post("/v1/beings", json={"name": "Gus"}), 201)["name"] == "Gus"
        assert [b["name"] for b in _ok(c.get("/v1/beings"))] == ["Gus"]
        _ok(c.get("/v1/beings/Gus/context"))
        r = c.get("/v1/beings")
        _problem(r, 429, "rate_limited")
        assert int(r.headers["retry-after"]) >= 1
        assert _ok(c.get("/v1/health"))["status"] == "ok"  # not rate-limited
