"""`GET /v1/admin/verify` (ADR 0069) in-process, on SQLite and PostgreSQL: an admin reads the chain's
verdict and the head as a checkpoint; one changed byte shows as `ok: false` at its position; a being
token is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram
from engram.services.tokens import TokenService
from tests.integration.test_log_chain import _change_one_byte, _positions, _write


@pytest.fixture
def client(engram: Engram) -> Iterator[TestClient]:
    _write(engram)
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as c:
        yield c


def _auth(engram: Engram, **scope: object) -> dict[str, str]:
    return {"Authorization": f"Bearer {TokenService(engram).issue(**scope).token}"}  # type: ignore[arg-type]


def test_an_admin_verifies_the_chain_and_sees_a_changed_byte(engram: Engram, client: TestClient) -> None:
    admin = _auth(engram, admin=True)
    positions = _positions(engram)
    whole = client.get("/v1/admin/verify", headers=admin)
    assert whole.status_code == 200, whole.text
    body = whole.json()
    assert body["ok"] is True and body["broken_at"] is None and body["checked"] >= len(positions)
    assert body["head_position"] >= positions[-1] and len(body["head_hash"]) == 64
    later = client.get("/v1/admin/verify", headers=admin, params={"from": positions[2]}).json()
    assert later["ok"] is True and later["from"] == positions[2] and later["checked"] < body["checked"]
    assert client.get("/v1/admin/verify", headers=admin, params={"from": -1}).status_code == 422
    assert client.get("/v1/admin/verify", headers=_auth(engram, being="Aria")).status_code == 403

    target = positions[2]
    _change_one_byte(engram, target)
    broken = client.get("/v1/admin/verify", headers=admin)
    assert broken.status_code == 200
    assert broken.json()["ok"] is False and broken.json()["broken_at"] == target
    assert "changed" in broken.json()["reason"]
