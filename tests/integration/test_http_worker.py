"""`engram serve` keeps the views current and patrols by itself (its embedded worker)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.integration.http_support import SCENE, base_env, cli, running_server


def test_embedded_worker_serves_fresh_reads_and_patrols(tmp_path: Path) -> None:
    env = base_env(
        tmp_path / "data",
        ENGRAM_PATROL_MIN_NOTES="3",
        ENGRAM_PATROL_CHECK_S="0.2",
        ENGRAM_CONSISTENCY_TIMEOUT_S="5",
    )
    token = json.loads(cli(env, "token", "create", "--admin", "--json").stdout)["token"]
    with running_server(env, tmp_path / "server.log", "--worker") as server:
        c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert c.post("/v1/beings", json={"name": "Aria"}).status_code == 201
        for i in range(3):
            scene = {**SCENE, "action": f"{SCENE['action']}, day {i}"}
            r = c.post("/v1/beings/Aria/notes", json={"kind": "scene", "text": json.dumps(scene)})
            assert r.status_code == 201, r.text
        assert len(c.get("/v1/beings/Aria/notes").json()) == 3  # the worker caught the views up
        deadline = time.monotonic() + 30
        nodes: list[object] = []
        while time.monotonic() < deadline and len(nodes) < 3:
            time.sleep(0.3)
            nodes = c.get("/v1/beings/Aria/nodes").json()
        assert len(nodes) == 3, "the worker inside the server patrolled the being by itself"
