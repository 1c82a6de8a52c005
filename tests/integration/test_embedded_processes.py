"""Several Engram processes on one embedded data directory (issue #7, item 6; ADR 0036): `engram serve`
owns the vector index and the CLI, `engram mcp` and `engram worker` reach it through it; a killed owner
hands the index over; a stopped one is named in one line.

Real processes on the embedded default (SQLite, Qdrant Edge), the hashing embedder, no LLM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from engram.projections.vectors import nodes_alias
from engram.services.beings import resolve_being
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.integration.http_support import ENGRAM, REPO, base_env, cli, running_server, scene, wait_until

EXIT_CONFLICT = 4


def owner_record(data: Path) -> dict[str, Any]:
    """Who owns the vector index, as its lock file says ({} while nobody does)."""
    text = (data / "vectors" / "owner.lock").read_text()
    record: dict[str, Any] = json.loads(text) if text else {}
    return record


def log_events(stderr: str, event: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in stderr.splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("event") == event]


def reached_through(done: subprocess.CompletedProcess[str]) -> set[int]:
    """The owners whose index this CLI run used (none if it needed no vectors)."""
    return {e["owner_pid"] for e in log_events(done.stderr, "vector_index_reached_through_owner")}


def scenes_file(path: Path, actions: list[str]) -> Path:
    path.write_text(
        "".join(scene(action=a, when=[f"2026-05-{1 + i % 28:02d}"]) + "\n" for i, a in enumerate(actions)),
        encoding="utf-8",
    )
    return path


@contextmanager
def background(env: Mapping[str, str], log_path: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`engram ARGS` running beside the test, its stderr in `log_path`; ended with SIGTERM."""
    with log_path.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [*ENGRAM, *args], env=dict(env), cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def test_cli_reads_and_writes_beside_a_running_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = base_env(data, ENGRAM_AUTO_PATROL="false")
    cli(env, "being", "create", "Aria")
    with running_server(env, tmp_path / "serve.log", "--worker") as server:
        owner = owner_record(data)
        assert (owner["pid"], owner["role"]) == (server.proc.pid, "engram serve")

        cli(env, "note", "Aria", "--scene", scene())
        patrol = cli(env, "patrol", "Aria")
        recall = cli(env, "recall", "Aria", "tomatoes in the garden with Mina")
        assert "Planted tomatoes with Mina in the garden" in recall.stdout

        cli(env, "note", "Aria", "--scene", scene(action="Baked sourdough bread with Lena", themes=["food"]))
        cli(env, "patrol", "Aria")
        searched = cli(env, "search", "Aria", "sourdough")
        query = cli(env, "query", "Aria", "sourdough bread with Lena", "--json")
        status = cli(env, "projections", "status", "--json")

        assert "Baked sourdough bread with Lena" in searched.stdout
        assert json.loads(query.stdout)["nodes"][0]["action"] == "Baked sourdough bread with Lena"
        rows = {r["name"]: r for r in json.loads(status.stdout)}
        assert rows["vectors"]["last_error"] is None and rows["vectors"]["position"] > 0
        # The reads and the patrol used the server's index, and the server kept it.
        for done in (patrol, recall, query):
            assert reached_through(done) == {server.proc.pid}
        assert owner_record(data)["pid"] == server.proc.pid
    # The server never needed another process's index.
    assert not log_events(server.log_path.read_text(), "vector_index_reached_through_owner")


def test_mcp_beside_a_server_whose_worker_patrols_its_notes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = base_env(data, ENGRAM_PATROL_MIN_NOTES="1", ENGRAM_PATROL_CHECK_S="0.5")
    cli(env, "being", "create", "Aria")
    basil = "Repotted the basil with Mina on the balcony"
    params = StdioServerParameters(
        command=ENGRAM[0], args=[*ENGRAM[1:], "mcp", "--being", "Aria"], env=env, cwd=str(REPO)
    )

    async def session_calls(session: ClientSession) -> dict[str, Any]:
        noted = await session.call_tool(
            "note_scene", {"scene": {"action": basil, "actors": ["me", "Mina"], "when": ["2026-06-01"]}}
        )
        assert not noted.is_error
        deadline = time.monotonic() + 90
        while True:  # until the server's worker patrolled the note into a memory
            recalled = await session.call_tool("recall", {"text": "basil on the balcony"})
            if recalled.structured_content["matched"] or time.monotonic() > deadline:
                return {"recall": recalled.structured_content}
            await anyio.sleep(0.5)

    async def run(errlog: Any) -> dict[str, Any]:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session_calls(session)

    with running_server(env, tmp_path / "serve.log", "--worker") as server:
        with (tmp_path / "mcp.stderr").open("w+", encoding="utf-8") as errlog:
            result = anyio.run(run, errlog)
            errlog.seek(0)
            mcp_log = errlog.read()
        recall = cli(env, "recall", "Aria", "basil on the balcony")
        assert owner_record(data)["pid"] == server.proc.pid

    assert basil in result["recall"]["text"]
    assert basil in recall.stdout
    # The server's worker turned the note into a memory.
    assert log_events(server.log_path.read_text(), "automatic patrol")
    assert {e["owner_pid"] for e in log_events(mcp_log, "vector_index_reached_through_owner")} == {
        server.proc.pid
    }


def test_a_worker_beside_a_server_without_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = base_env(data, ENGRAM_AUTO_PATROL="false")
    cli(env, "being", "create", "Aria")
    actions = [f"Walked the dog {i} times around the lake" for i in range(1, 21)]
    with running_server(env, tmp_path / "serve.log", "--no-worker") as server:
        with background(env, tmp_path / "worker.log", "worker", "--json") as worker:
            assert wait_until(lambda: "projection lock acquired" in (tmp_path / "worker.log").read_text(), 60)
            cli(env, "note", "Aria", "--file", str(scenes_file(tmp_path / "scenes.jsonl", actions)))
            cli(env, "patrol", "Aria")
            recall = cli(env, "recall", "Aria", "walked the dog 7 times around the lake")
            worker.send_signal(signal.SIGTERM)
            out, _ = worker.communicate(timeout=60)
        assert owner_record(data)["pid"] == server.proc.pid
    assert worker.returncode == 0
    assert "Walked the dog" in recall.stdout
    assert json.loads(out)["vectors"]["events"] > 0  # the worker projected the vectors, into serve's index
    worker_log = (tmp_path / "worker.log").read_text()
    assert {e["owner_pid"] for e in log_events(worker_log, "vector_index_reached_through_owner")} == {
        server.proc.pid
    }


def test_a_killed_owner_hands_over_and_no_vector_write_is_lost_or_doubled(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = base_env(data, ENGRAM_AUTO_PATROL="false")
    cli(env, "being", "create", "Aria")
    actions = [f"Sorted {i} old letters in the attic" for i in range(1, 301)]
    cli(env, "note", "Aria", "--file", str(scenes_file(tmp_path / "scenes.jsonl", actions)))
    settings = Settings(data_dir=data, embedder="hashing", llm="none")
    with (
        running_server(env, tmp_path / "serve.log", "--no-worker") as server,
        background(env, tmp_path / "worker.log", "worker") as worker,
        background(env, tmp_path / "patrol.log", "patrol", "Aria") as patrol,
        bootstrap(settings) as watcher,
    ):
        being_id = resolve_being(watcher.store, "Aria").id
        # Kill the owner once the worker projects the patrol's nodes: vector writes in flight.
        assert wait_until(lambda: bool(watcher.views.read.nodes(being_id, limit=1)), timeout=120)
        server.proc.kill()
        server.proc.wait()
        assert patrol.wait(timeout=180) == 0, (tmp_path / "patrol.log").read_text()[-3000:]
        # The worker took the index over (it was waiting for the lock) and catches up.
        assert wait_until(lambda: owner_record(data).get("pid") == worker.pid, timeout=30)
        assert owner_record(data)["role"] == "engram worker"
        watcher.views.wait_for(watcher.views.source.head(), ["memory", "vectors"], timeout=120)

        nodes = {r["id"]: r for r in watcher.views.read.nodes(being_id)}
        index = watcher.views.vector_index
        collection = nodes_alias(watcher.embedder.model_id)
        points = index.retrieve(collection, being_id, [UUID(i) for i in nodes])
        count = index.count(collection, being_id)
    assert len(nodes) == len(actions)
    assert count == len(nodes)  # no point twice, none missing
    assert {str(p.id) for p in points} == set(nodes)
    for p in points:
        assert p.payload["status"] == nodes[str(p.id)]["status"]
        assert p.payload["cluster_id"] == nodes[str(p.id)]["cluster_id"]


def test_a_stopped_owner_is_named_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = base_env(data, ENGRAM_AUTO_PATROL="false")
    cli(env, "being", "create", "Aria")
    cli(env, "note", "Aria", "--scene", scene())
    cli(env, "patrol", "Aria")
    with running_server(env, tmp_path / "serve.log", "--no-worker") as server:
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            done = cli(env, "recall", "Aria", "tomatoes in the garden", ok=False)
            took = time.monotonic() - started
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        again = cli(env, "recall", "Aria", "tomatoes in the garden")
    assert done.returncode == EXIT_CONFLICT, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert f"`engram serve` (pid {server.proc.pid}, since " in line
    assert "stopped" in line and f"kill -CONT {server.proc.pid}" in line
    assert took < 60  # bounded: the owner's silence is noticed, not waited out
    assert "Planted tomatoes" in again.stdout
