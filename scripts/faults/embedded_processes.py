#!/usr/bin/env python3
"""Fault script: several Engram processes on one embedded data directory (issue #7, item 6; ADR 0036).

    python scripts/faults/embedded_processes.py [--keep DIR]

Runs `engram` as a user would (real processes, the embedded default, the hashing embedder, no LLM) and
prints one line per check, `held: …` or `FAILED: …`; exits 0 only if every check held.

1. CLI beside `engram serve`: note, patrol, recall, query, search and `projections status` while the
   server runs; reads see their own writes and go through the server, which keeps the index.
2. `engram mcp` beside `engram serve`: a note taken through MCP is patrolled by the server's worker and
   recalled through MCP and the CLI.
3. SIGKILL of the owner: `engram serve --no-worker` owns the index, `engram worker` projects into it;
   the server is killed while a patrol writes; the worker takes the index over, the patrol finishes,
   and the vector collection holds exactly the memory view's nodes (none lost, none twice).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

ENGRAM = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
RESULTS: list[bool] = []


def check(what: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append(ok)
    print(f"{'held' if ok else 'FAILED'}: {what}{'' if ok or not detail else f' ({detail})'}", flush=True)
    return ok


def environment(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        ENGRAM_DATA_DIR=str(data),
        ENGRAM_EMBEDDER="hashing",
        ENGRAM_LLM="none",
        ENGRAM_LOG_FORMAT="json",
        ENGRAM_LOG_LEVEL="info",
        **extra,
    )
    return env


def engram(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def scene(action: str, day: int = 1) -> str:
    return json.dumps({"action": action, "actors": ["me", "Mina"], "when": [f"2026-05-{day:02d}"]})


def owner(data: Path) -> dict[str, Any]:
    text = (data / "vectors" / "owner.lock").read_text() if (data / "vectors" / "owner.lock").exists() else ""
    record: dict[str, Any] = json.loads(text) if text else {}
    return record


def owners_reached(stderr: str) -> set[int]:
    """The owners through which a process reached the vector index, from its JSON log."""
    found = set()
    for line in stderr.splitlines():
        if line.startswith("{") and '"vector_index_reached_through_owner"' in line:
            found.add(int(json.loads(line)["owner_pid"]))
    return found


def until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@contextmanager
def process(env: dict[str, str], log: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`engram ARGS` in the background, stderr to `log`; SIGTERM (then SIGKILL) at the end."""
    with log.open("w") as err:
        proc = subprocess.Popen([*ENGRAM, *args], env=env, stdout=subprocess.PIPE, stderr=err, text=True)
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


@contextmanager
def server(env: dict[str, str], log: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with process(env, log, "serve", "--no-auth", "--port", str(port), *args) as proc:
        up = until(lambda: proc.poll() is not None or _health(port), 90)
        if not up or proc.poll() is not None:
            raise RuntimeError(f"engram serve did not start:\n{log.read_text()[-2000:]}")
        yield proc


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


# -- 1 ------------------------------------------------------------------------------------------


def cli_beside_serve(work: Path) -> None:
    data = work / "data"
    env = environment(data, ENGRAM_AUTO_PATROL="false")
    engram(env, "being", "create", "Aria")
    started = time.monotonic()
    engram(env, "being", "list")  # what starting a command costs here, for the timings below
    baseline = time.monotonic() - started
    with server(env, work / "serve.log", "--worker") as serve:
        check("1. engram serve holds the vector index", owner(data).get("pid") == serve.pid, str(owner(data)))
        steps = [
            ("note", ["note", "Aria", "--scene", scene("Planted tomatoes with Mina in the garden")], None),
            ("patrol", ["patrol", "Aria"], None),
            ("recall", ["recall", "Aria", "tomatoes in the garden"], "Planted tomatoes"),
            ("note", ["note", "Aria", "--scene", scene("Baked sourdough bread with Lena", 3)], None),
            ("patrol", ["patrol", "Aria"], None),
            ("search", ["search", "Aria", "sourdough"], "Baked sourdough bread"),
            ("query", ["query", "Aria", "sourdough bread with Lena"], "Baked sourdough bread"),
            ("projections status", ["projections", "status"], "vectors"),
        ]
        for name, args, expected in steps:
            started = time.monotonic()
            done = engram(env, *args)
            took = time.monotonic() - started
            ok = done.returncode == 0 and (expected is None or expected in done.stdout)
            foreign = owners_reached(done.stderr) - {serve.pid}
            check(
                f"1. engram {name} beside the server ({took:.1f} s, `engram being list` {baseline:.1f} s;"
                f" exit {done.returncode})",
                ok and not foreign,
                (done.stderr.strip().splitlines() or ["no output"])[-1][:300],
            )
        check("1. the server kept the index", owner(data).get("pid") == serve.pid, str(owner(data)))


# -- 2 ------------------------------------------------------------------------------------------


def mcp_beside_serve(work: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    data = work / "data"
    env = environment(data, ENGRAM_PATROL_MIN_NOTES="1", ENGRAM_PATROL_CHECK_S="0.5")
    engram(env, "being", "create", "Aria")
    basil = "Repotted the basil with Mina on the balcony"
    params = StdioServerParameters(command=ENGRAM[0], args=[*ENGRAM[1:], "mcp", "--being", "Aria"], env=env)

    async def talk(errlog: Any) -> tuple[bool, str]:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            noted = await session.call_tool("note_scene", {"scene": json.loads(scene(basil))})
            if noted.is_error:
                return False, "note_scene failed"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                recalled = await session.call_tool("recall", {"text": "basil on the balcony"})
                if not recalled.is_error and basil in (recalled.structured_content or {}).get("text", ""):
                    return True, ""
                await anyio.sleep(0.5)
            return False, "the note never became a memory"

    with server(env, work / "serve.log", "--worker") as serve, (work / "mcp.log").open("w+") as errlog:
        ok, why = anyio.run(talk, errlog)
        check("2. a note taken through engram mcp is recalled through MCP", ok, why)
        done = engram(env, "recall", "Aria", "basil on the balcony")
        check("2. ... and through the CLI", done.returncode == 0 and basil in done.stdout, done.stderr[-300:])
        patrolled = '"automatic patrol"' in (work / "serve.log").read_text()
        check("2. the server's worker patrolled it", patrolled)
        errlog.seek(0)
        reached = owners_reached(errlog.read())
        check("2. engram mcp reached the index through the server", reached == {serve.pid}, str(reached))


# -- 3 ------------------------------------------------------------------------------------------


def killed_owner(work: Path) -> None:
    from engram.adapters.logging import configure_logging
    from engram.projections.vectors import nodes_alias
    from engram.services.beings import resolve_being
    from engram.services.bootstrap import bootstrap
    from engram.services.config import Settings

    configure_logging("warning")  # this process's log on stderr, out of the checks' lines
    data = work / "data"
    env = environment(data, ENGRAM_AUTO_PATROL="false")
    engram(env, "being", "create", "Aria")
    notes = work / "notes.jsonl"
    notes.write_text(
        "".join(scene(f"Sorted {i} old letters in the attic", 1 + i % 28) + "\n" for i in range(400))
    )
    engram(env, "note", "Aria", "--file", str(notes))
    with ExitStack() as stack:
        serve = stack.enter_context(server(env, work / "serve.log", "--no-worker"))
        worker = stack.enter_context(process(env, work / "worker.log", "worker"))
        patrol = stack.enter_context(process(env, work / "patrol.log", "patrol", "Aria"))
        watcher = stack.enter_context(bootstrap(Settings(data_dir=data, embedder="hashing", llm="none")))
        being_id: UUID = resolve_being(watcher.store, "Aria").id
        writing = until(lambda: bool(watcher.views.read.nodes(being_id, limit=1)), 180)
        check("3. the worker projects the patrol's nodes into the server's index", writing)
        serve.send_signal(signal.SIGKILL)
        serve.wait()
        code = patrol.wait(timeout=300)
        check("3. the patrol in flight finishes", code == 0, (work / "patrol.log").read_text()[-300:])
        took_over = until(lambda: owner(data).get("pid") == worker.pid, 60)
        check("3. the worker took the index over", took_over, str(owner(data)))
        watcher.views.wait_for(watcher.views.source.head(), ["memory", "vectors"], timeout=300)
        nodes = {r["id"]: r["status"] for r in watcher.views.read.nodes(being_id)}
        index, collection = watcher.views.vector_index, nodes_alias(watcher.embedder.model_id)
        points = {
            str(p.id): p.payload["status"]
            for p in index.retrieve(collection, being_id, [UUID(i) for i in nodes])
        }
        count = index.count(collection, being_id)
        check(f"3. every note became a node ({len(nodes)} of 400)", len(nodes) == 400)
        check(
            f"3. the collection holds each node once ({count} points, {len(points)} found)",
            count == len(nodes) and points == nodes,
        )


SCENARIOS = {"cli": cli_beside_serve, "mcp": mcp_beside_serve, "kill": killed_owner}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", type=Path, help="Keep the data directories and logs under this folder.")
    parser.add_argument("--only", choices=list(SCENARIOS), action="append", help="Run only these scenarios.")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="engram-faults-"))
    try:
        for name in args.only or list(SCENARIOS):
            work = root / name
            work.mkdir(parents=True, exist_ok=True)
            try:
                SCENARIOS[name](work)
            except Exception as exc:  # a scenario that could not run is a failed check, with its reason
                check(f"scenario {name} ran to its end", False, f"{type(exc).__name__}: {exc}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{sum(RESULTS)} of {len(RESULTS)} checks held")
    sys.exit(0 if RESULTS and all(RESULTS) else 1)


if __name__ == "__main__":
    main()
