"""Helpers for the HTTP API tests: a real `engram serve` subprocess, the CLI, a fake OpenAI server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ENGRAM = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
REPO = Path(__file__).resolve().parents[2]

SCENE: dict[str, Any] = {
    "action": "Planted tomatoes with Mina in the garden",
    "actors": ["me", "Mina"],
    "when": ["2026-05-02"],
    "feeling": "hopeful",
    "importance": 0.6,
    "themes": ["garden"],
}


def scene(**changes: Any) -> str:
    return json.dumps({**SCENE, **changes})


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def base_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        ENGRAM_DATA_DIR=str(data_dir),
        ENGRAM_EMBEDDER="hashing",
        ENGRAM_LLM="none",
        ENGRAM_LOG_FORMAT="json",
        ENGRAM_LOG_LEVEL="info",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def cli(env: Mapping[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `engram ARGS` in a process of its own."""
    done = subprocess.run(
        [*ENGRAM, *args], env=dict(env), cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    if ok:
        assert done.returncode == 0, done.stderr
    return done


class Server:
    """`engram serve` on a free loopback port, with its stderr (the log) kept in a file."""

    def __init__(self, env: Mapping[str, str], log_path: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            # The tests drive the views themselves (e.g. hold a view's lock to provoke a 503): no worker
            # inside the server unless a test asks for one.
            [*ENGRAM, "serve", "--port", str(self.port), *(args or ("--no-worker",))],
            env=dict(env),
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"engram serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"engram serve did not answer /v1/health in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8")

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@contextmanager
def running_server(env: Mapping[str, str], log_path: Path, *args: str) -> Iterator[Server]:
    server = Server(env, log_path, *args)
    try:
        yield server
    finally:
        server.stop()


# -- a fake OpenAI-compatible chat completions server ----------------------------------------------

DIARY: dict[str, Any] = {
    "diary": "I planted tomatoes with Mina today.\nThe soil was warm.\nI want to watch them grow.",
    "think_md": ["Water the tomatoes", "Ask Mina about seeds", "Buy a trellis"],
}

ANSWERS: dict[str, Any] = {
    "classify_root": {"root": "Private"},
    "name_cluster": {"name": "Garden days"},
    "consolidate_cluster": {"merges": [], "make_dead": []},
    "split_cluster": {"groups": []},
    "write_diary": DIARY,
    "repair_scene": {
        "action": "Felt great after the run",
        "actors": ["me"],
        "when": ["2026-05-03"],
        "setting": None,
        "feeling": "great",
        "importance": 0.5,
        "themes": [],
    },
}


class FakeOpenAI:
    """Answers `POST /v1/chat/completions` by the requested JSON schema's name, and records each request.

    `gate` (if set) holds every answer until it is set, so a test can keep a patrol in flight.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.first_request = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(
                    {"path": self.path, "authorization": self.headers.get("authorization"), "body": body}
                )
                fake.first_request.set()
                fake.gate.wait(30)
                task = body.get("response_format", {}).get("json_schema", {}).get("name", "")
                answer = {
                    "id": f"chatcmpl-{len(fake.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake-gpt",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": json.dumps(ANSWERS.get(task, {})),
                                "refusal": None,
                            },
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def without_cid(problem: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in problem.items() if k != "correlation_id"}
