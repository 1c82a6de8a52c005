"""The HTTP adapter and API tokens in-process (FastAPI's TestClient), on SQLite and PostgreSQL.

What the subprocess tests cannot reach easily: a domain invariant refusing a command (409), a
command that keeps losing optimistic-concurrency races (409), an unexpected error (500 without
leaking anything), JSON that is not Unicode text, tokens issued and revoked by another process,
the tokens view rebuilt, and the small parts (rate limiter, loopback check, status mapping).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from engram.adapters.cli.http_cmds import is_loopback
from engram.adapters.http import HttpSettings, create_app
from engram.adapters.http.middleware import TokenBuckets, body_text_problem
from engram.adapters.http.problems import status_for
from engram.adapters.logging import configure_logging
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.errors import (
    InvalidInput,
    InvalidScene,
    InvalidTransition,
    PayloadTooLarge,
    PinnedNodeCannotDie,
)
from engram.domain.node import MemoryNode
from engram.domain.scene import validate_scene_object
from engram.domain.token import ApiToken
from engram.services.bootstrap import Engram, bootstrap
from engram.services.errors import (
    ConcurrencyConflict,
    ConsistencyTimeout,
    DuplicateBeing,
    IdempotencyConflict,
    NotFound,
    WriteRaced,
)
from engram.services.patrol.run import PatrolAlreadyRunning
from engram.services.tokens import TokenService, hash_token

SCENE = json.dumps({"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]})


@pytest.fixture
def api(engram: Engram) -> Iterator[tuple[TestClient, dict[str, str]]]:
    engram.beings.register("Aria")
    token = TokenService(engram).issue(admin=True).token
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        yield client, {"Authorization": f"Bearer {token}"}


def _dead_node(e: Engram, being_name: str) -> MemoryNode:
    being = e.store.get(Being, Being.register(being_name, e.clock.now())[0].id)
    root = e.store.get(Cluster, being.business_root_id)
    scene = validate_scene_object(
        {"action": "faded", "actors": ["me"], "when": ["2026-01-01"], "importance": 0.01}
    )
    node = MemoryNode.create(uuid4(), scene, root, 0, e.clock.now())
    node.flag_dying(10, e.clock.now())
    node.make_dead(10, "test", e.clock.now())
    e.store.save(node)
    return node


def test_a_domain_rule_refusing_a_command_is_409(
    engram: Engram, api: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = api
    node = _dead_node(engram, "Aria")
    r = client.put(f"/v1/beings/Aria/nodes/{node.id}/pin", headers=auth)
    assert r.status_code == 409 and r.json()["code"] == "invalid_transition"
    assert "recall it first" in r.json()["detail"]


def test_losing_every_concurrency_race_is_409(
    engram: Engram, api: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, auth = api

    def always_raced(*aggregates: Any) -> int:
        raise WriteRaced()

    monkeypatch.setattr(engram.store, "save", always_raced)
    r = client.post("/v1/beings/Aria/notes", json={"text": SCENE}, headers=auth)
    assert r.status_code == 409 and r.json()["code"] == "concurrency_conflict"
    assert r.json()["details"]["attempts"] == engram.settings.command_retries


def test_an_unexpected_error_is_a_bare_500_and_the_log_holds_no_secret(
    engram: Engram,
    api: tuple[TestClient, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, auth = api
    configure_logging("info", "json")

    def broken(being_ref: str, user: str | None = None) -> Any:
        raise RuntimeError("the context builder broke")

    monkeypatch.setattr(engram.reading, "context", broken)
    r = client.get("/v1/beings/Aria/context", headers={**auth, "X-LLM-Key": "sk-secret-123"})
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["code"] == "internal_error" and "broke" not in body["detail"]
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    failure = next(x for x in lines if x["event"] == "request failed")
    assert (
        "RuntimeError: the context builder broke" in failure["error"] and "Traceback" in failure["traceback"]
    )
    assert failure["correlation_id"] == body["correlation_id"]
    assert auth["Authorization"].split()[1] not in err and "sk-secret-123" not in err
    assert next(x for x in lines if x["event"] == "request")["status"] == 500


def test_text_the_stores_cannot_hold_is_422(api: tuple[TestClient, dict[str, str]]) -> None:
    """Lone surrogates cannot be encoded, and PostgreSQL text cannot hold NUL: refused at the door."""
    client, auth = api
    headers = {**auth, "Content-Type": "application/json"}
    for path, body in [
        ("/v1/beings/Aria/notes", b'{"kind": "todo", "text": "a \\udc00 b"}'),
        ("/v1/beings/Aria/recall", b'{"query": "\\ud83d"}'),
        ("/v1/beings/Aria/notes", b'{"kind": "todo", "text": "a\\u0000b"}'),
        ("/v1/beings/Aria/query", b'{"query": "x\\u0000"}'),
        ("/v1/beings/Aria/notes/batch", b'{"notes": [{"text": "ok"}, {"text": "\\u0000"}]}'),
    ]:
        r = client.post(path, content=body, headers=headers)
        assert r.status_code == 422 and r.json()["code"] == "invalid_input", (path, r.text)
    for url in ("/v1/beings/Aria/search?q=a%00b", "/v1/beings/Aria%00/context"):
        r = client.get(url, headers=auth)
        assert r.status_code == 422 and "NUL" in r.json()["detail"]
    emoji = client.post(
        "/v1/beings/Aria/notes", content=b'{"kind": "todo", "text": "\\ud83d\\ude00"}', headers=headers
    )
    assert emoji.status_code == 201
    assert client.get("/v1/beings/Aria/search?q=%2500", headers=auth).status_code == 200
    assert len(client.get("/v1/beings/Aria/notes", headers=auth).json()) == 1
    assert body_text_problem(b'["\\udfff"]') and not body_text_problem(b'["\\\\udfff"]')
    assert not body_text_problem(b'{"k": "\\ud83d\\ude00"}') and not body_text_problem(b'{"k": "\\udc00')


def test_tokens_from_another_process_verify_at_once_and_revocations_bite(
    engram: Engram, make_settings: Any
) -> None:
    engram.beings.register("Aria")
    here = TokenService(engram, refresh_s=0.2)
    assert here.verify("eng_" + "A" * 43) is None
    assert here.verify("not-a-token") is None
    elsewhere = bootstrap(make_settings())  # another process on the same store
    try:
        issued = TokenService(elsewhere).issue(being="Aria", label="agent")
        principal = here.verify(issued.token)  # unknown hash: the view catches up first
        assert principal is not None and principal.being_id == UUID(issued.being_id or "")
        assert not principal.is_admin and principal.token_id == issued.id
        TokenService(elsewhere).revoke(issued.id, "rotated")
        time.sleep(0.3)
        assert here.verify(issued.token) is None
    finally:
        elsewhere.close()
    listed = here.list(include_revoked=True)
    assert [(t.id, t.revoked, t.being, t.label) for t in listed] == [(issued.id, True, "Aria", "agent")]
    assert here.list() == []


def test_the_tokens_view_rebuilds_to_the_same_rows(engram: Engram) -> None:
    engram.beings.register("Aria")
    tokens = TokenService(engram)
    kept = tokens.issue(admin=True, label="ops")
    gone = tokens.issue(being="Aria")
    tokens.revoke(gone.prefix)
    assert tokens.revoke(gone.id).details["already_revoked"] is True
    before = tokens.list(include_revoked=True)
    engram.views.rebuild("tokens")
    assert tokens.list(include_revoked=True) == before
    assert tokens.verify(kept.token) is not None and tokens.verify(gone.token) is None
    with pytest.raises(NotFound):
        tokens.revoke("eng_zzzzzzzz")
    with pytest.raises(InvalidInput):
        tokens.issue(being="Aria", admin=True)
    with pytest.raises(NotFound):
        tokens.issue(being="Nobody")


def test_api_token_aggregate_rules() -> None:
    at = datetime(2026, 11, 1, tzinfo=UTC)
    digest = hash_token("eng_x")
    for scope, being in (("root", None), ("being", None), ("admin", uuid4())):
        with pytest.raises(InvalidInput):
            ApiToken.issue(uuid4(), scope, being, digest, "eng_x", "", at)
    with pytest.raises(InvalidInput):
        ApiToken.issue(uuid4(), "admin", None, "not-a-hash", "eng_x", "", at)
    with pytest.raises(InvalidInput):
        ApiToken.issue(uuid4(), "admin", None, digest, "eng_x", "x" * 201, at)
    token = ApiToken.issue(uuid4(), "admin", None, digest, "eng_x", " ops ", at)
    assert token.label == "ops" and not token.revoked
    token.revoke("rotated", at)
    assert token.revoked and token.revoke_reason == "rotated" and token.revoked_at == at
    with pytest.raises(InvalidTransition):
        token.revoke("again", at)
    assert [type(e).__name__ for e in token.collect_events()] == ["Issued", "Revoked"]


def test_token_buckets_allow_bursts_then_refill() -> None:
    now = [0.0]
    buckets = TokenBuckets(rate=2.0, burst=3, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0.0  # buckets are per key
    now[0] = 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0
    now[0] = 100.0
    assert [buckets.take("a") for _ in range(4)][-1] > 0  # refills up to the burst, no further


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com", ""))


def test_errors_map_to_statuses() -> None:
    cases = {
        NotFound("x"): 404,
        InvalidInput("x"): 422,
        InvalidScene("x", []): 422,
        PayloadTooLarge("x"): 413,
        DuplicateBeing("x"): 409,
        IdempotencyConflict("x"): 409,
        ConcurrencyConflict("x"): 409,
        PatrolAlreadyRunning("x"): 409,
        PinnedNodeCannotDie("x"): 409,
        ConsistencyTimeout("x"): 503,
    }
    assert {type(e).__name__: status_for(e) for e in cases} == {type(e).__name__: s for e, s in cases.items()}


def test_token_commands(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from engram.adapters.cli.main import cli

    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.stderr
        return result

    run("being", "create", "Aria")
    assert "give --being BEING or --admin" in run("token", "create", code=2).stderr
    run("token", "create", "--being", "Aria", "--admin", code=2)
    assert "not found" in run("token", "create", "--being", "Nobody", code=3).stderr
    created = run("token", "create", "--being", "Aria", "--label", "agent")
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("eng_") and "a token for being Aria" in created.stdout
    assert "shown only now" in created.stderr
    listed = run("token", "list").stdout
    assert token[:12] in listed and "being Aria" in listed and "agent" in listed and token not in listed
    assert "revoked token" in run("token", "revoke", token[:12]).stdout
    assert "already revoked" in run("token", "revoke", token[:12]).stdout
    assert "no tokens yet" in run("token", "list").stdout
    assert "REVOKED" in run("token", "list", "--all").stdout
    run("token", "revoke", "eng_nothing", code=3)
