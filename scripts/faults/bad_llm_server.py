"""Fault script: an OpenAI-compatible server that answers badly, and `engram patrol` against it.

For each case, a small local HTTP server answers every chat completion the same bad way (an HTML page
with status 200, a body that is not JSON, an empty body, JSON of the wrong shape, an answer of 4 MiB,
…); a fresh data dir gets a being and a few notes; `engram patrol` runs against the server
(`ENGRAM_LLM=openai`, `ENGRAM_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`, a dummy key, the hashing
embedder). A case holds when the patrol ends with exit code 0, records what came back as a rejected
decision (`llm_bad_response` with the status, content type and first bytes, or a capped answer with
its cut marked) and leaks no key.

    python scripts/faults/bad_llm_server.py            # every case
    python scripts/faults/bad_llm_server.py html empty # some

Prints one line per case, `held: …` or `FAILED: …`; the exit code is 0 only if every case held.
The tests import `BadLLMServer` and `CASES` from here (tests/integration/test_patrol_bad_llm.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ENGRAM = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
DUMMY_KEY = "sk-fault-script-dummy-key-000000"
FOUR_MIB = 4 * 1024 * 1024
CAP_KIB = 64


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str | None
    body: Callable[[str], bytes]
    """The body for a request of this task (`consolidate_cluster`, `write_diary`, …)."""
    expect: str
    """`bad_response` (recorded as `llm_bad_response`), `too_large` (capped), `outage` (steps skipped)."""


def _completion(content: str | None) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "fault-gpt",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


def _fixed(body: bytes) -> Callable[[str], bytes]:
    return lambda task: body


LOGIN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in to the corporate proxy</title></head>"
    b"<body><form action='/login'><input name='user'></form></body></html>"
)

CASES: dict[str, Reply] = {
    "html": Reply(200, "text/html; charset=utf-8", _fixed(LOGIN_PAGE), "bad_response"),
    "not_json": Reply(200, "application/json", _fixed(b"upstream said: OK"), "bad_response"),
    "text_plain": Reply(200, "text/plain", _fixed(b"OK"), "bad_response"),
    "empty": Reply(200, "application/json", _fixed(b""), "bad_response"),
    "no_choices": Reply(
        200, "application/json", _fixed(b'{"id": "x", "object": "chat.completion"}'), "bad_response"
    ),
    "empty_choices": Reply(200, "application/json", _fixed(b'{"choices": []}'), "bad_response"),
    "null_content": Reply(200, "application/json", _fixed(_completion(None)), "bad_response"),
    "not_an_object": Reply(200, "application/json", _fixed(b"[]"), "bad_response"),
    "oversized": Reply(200, "application/json", _fixed(_completion("x" * FOUR_MIB)), "too_large"),
    "html_502": Reply(502, "text/html", _fixed(b"<html><body>502 Bad Gateway</body></html>"), "outage"),
}


class BadLLMServer:
    """A chat-completions server on a free loopback port that answers every request with `reply`."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.tasks: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                task = str(request.get("response_format", {}).get("json_schema", {}).get("name", ""))
                server.tasks.append(task)
                body = server.reply.body(task)
                self.send_response(server.reply.status)
                if server.reply.content_type is not None:
                    self.send_header("content-type", server.reply.content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> BadLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


NOTES = [
    {"action": "Baked rye sourdough loaves in the kitchen oven", "actors": ["me"], "when": ["2025-11-15"]},
    {"action": "Baked rye sourdough loaves again", "actors": ["me"], "when": ["2025-11-16"]},
    {"action": "Walked the dog along the river", "actors": ["me"], "when": ["2026-05-02"]},
    {"action": "Called grandmother on her birthday", "actors": ["me", "Grandma"], "when": ["2026-06-28"]},
]


def _env(data_dir: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        ENGRAM_DATA_DIR=str(data_dir),
        ENGRAM_EMBEDDER="hashing",
        ENGRAM_LLM="openai",
        ENGRAM_OPENAI_BASE_URL=url,
        ENGRAM_OPENAI_API_KEY=DUMMY_KEY,
        ENGRAM_LLM_MAX_RETRIES="1",
        ENGRAM_LLM_MAX_ANSWER_KIB=str(CAP_KIB),
        ENGRAM_LOG_LEVEL="warning",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


def _engram(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # This interpreter running engram with arguments the script wrote: nothing untrusted reaches it.
    return subprocess.run(
        [*ENGRAM, *args], env=dict(env), cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def _decisions(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in log if e["type"] == "PatrolRun.LlmDecisionRecorded"]


def _check(reply: Reply, report: dict[str, Any], log: list[dict[str, Any]]) -> str | None:
    """What went wrong, or None when the case held."""
    steps = {s["step"]: s for s in report["steps"]}
    decisions = _decisions(log)
    largest = max(len(json.dumps(e["payload"], ensure_ascii=False).encode()) for e in log)
    if largest >= CAP_KIB * 1024:
        return f"an event of {largest:,} bytes is stored (cap {CAP_KIB} KiB)"
    if reply.expect == "outage":
        skipped = [s for s in ("consolidate", "diary") if steps[s]["state"] == "skipped"]
        return None if skipped == ["consolidate", "diary"] else f"steps not skipped: {steps}"
    if reply.expect == "too_large":
        cut = [
            d
            for d in decisions
            if any(r.get("code") == "llm_answer_too_large" for r in d["rejected"])
            and "…[cut: " in d["raw_answer"]
        ]
        return None if cut else "no decision recorded the answer as too large with its cut marked"
    recorded = [r for d in decisions for r in d["rejected"] if r.get("code") == "llm_bad_response"]
    if not recorded:
        return "no decision recorded an llm_bad_response"
    if recorded[0].get("status") != reply.status or "content_type" not in recorded[0]:
        return f"the rejection lacks the status or content type: {recorded[0]}"
    for step in ("consolidate", "diary"):
        if steps[step]["state"] != "skipped" or "llm_bad_response" not in steps[step]["reason"]:
            return f"step {step} did not end on the bad response: {steps[step]}"
    return None


def run_case(name: str) -> tuple[bool, str]:
    reply = CASES[name]
    with tempfile.TemporaryDirectory(prefix="engram-fault-") as tmp, BadLLMServer(reply) as server:
        env = _env(Path(tmp) / "data", server.url)
        notes = Path(tmp) / "notes.jsonl"
        notes.write_text("".join(json.dumps(n) + "\n" for n in NOTES), encoding="utf-8")
        for args in (("being", "create", "Aria"), ("note", "Aria", "--file", str(notes))):
            done = _engram(env, *args)
            if done.returncode != 0:
                return False, f"{name}: setup `engram {' '.join(args)}` failed: {done.stderr.strip()[-300:]}"
        done = _engram(env, "patrol", "Aria", "--json")
        output = done.stdout + done.stderr
        if DUMMY_KEY in output:
            return False, f"{name}: the key reached the output"
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
            return False, f"{name}: `engram patrol` exited {done.returncode}: {last[0][:300]}"
        log = json.loads(_engram(env, "log", "--being", "Aria", "--limit", "10000", "--json").stdout)
        problem = _check(reply, json.loads(done.stdout), log)
        if problem is not None:
            return False, f"{name}: {problem}"
        asked = len(server.tasks)
        return True, f"{name}: exit 0, {len(_decisions(log))} decisions recorded, {asked} requests answered"


def main(argv: list[str]) -> int:
    names = argv or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown cases {unknown}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    held = 0
    for name in names:
        ok, line = run_case(name)
        held += ok
        print(f"{'held' if ok else 'FAILED'}: {line}", flush=True)
    return 0 if held == len(names) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
