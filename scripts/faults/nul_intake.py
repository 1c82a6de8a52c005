"""Fault: text no store can keep (NUL, lone UTF-16 surrogates) sent through the CLI and HTTP.

    .venv/bin/python scripts/faults/nul_intake.py [--database-url postgresql://…]

On a temporary data directory (and, with `--database-url`, on a fresh schema of that PostgreSQL
database), every input must be refused with exit code 2 / HTTP 422 naming the field, nothing may
reach the log, and the views must stay healthy. Prints `held: …` or `FAILED: …` per check; exits 0
only if every check held (issue #7, ADR 0029).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
ENGRAM = [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]
SCENE = {"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}
failures: list[str] = []


def check(held: bool, what: str, detail: str = "") -> None:
    print(f"{'held' if held else 'FAILED'}: {what}" + (f" ({detail})" if detail and not held else ""))
    if not held:
        failures.append(what)


def cli(env: dict[str, str], *args: str | bytes) -> subprocess.CompletedProcess[str]:
    # bytes arguments reach the process as they are: one that is not UTF-8 becomes a lone surrogate.
    return subprocess.run(
        [*ENGRAM, *args],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        check=False,
    )


def head(env: dict[str, str]) -> int:
    done = cli(env, "log", "--json", "--limit", "10000")
    return max((e["position"] for e in json.loads(done.stdout)), default=0)


def refused_by_cli(env: dict[str, str], what: str, args: Sequence[str | bytes], field: str) -> None:
    done = cli(env, *args)
    named = field in done.stderr and "must not contain" in done.stderr
    check(done.returncode == 2 and named, f"CLI refuses {what}, naming {field!r}", done.stderr.strip()[-300:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def server(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [*ENGRAM, "serve", "--no-auth", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)


def refused_by_http(base: str, what: str, method: str, path: str, body: str, field: str) -> None:
    answer = httpx.request(
        method, base + path, content=body.encode(), headers={"Content-Type": "application/json"}, timeout=30
    )
    problem = answer.json()
    fields = {e["field"] for e in problem.get("errors") or []}
    held = answer.status_code == 422 and field in fields
    check(held, f"HTTP refuses {what}, naming {field!r}", f"{answer.status_code} {answer.text[:300]}")


def run(env: dict[str, str], backend: str, scratch: Path) -> None:
    print(f"-- {backend}")
    check(cli(env, "being", "create", "Aria").returncode == 0, "a being is created")
    start = head(env)
    nul, surrogate = (
        json.dumps({**SCENE, "action": "a\x00b"}),
        json.dumps({**SCENE, "actors": ["me", "\ud800"]}),
    )
    refused_by_cli(env, "a scene with an escaped NUL", ["note", "Aria", "--scene", nul], "action")
    refused_by_cli(env, "a scene with a lone surrogate", ["note", "Aria", "--scene", surrogate], "actors.1")
    lines = scratch / f"{backend}.jsonl"
    lines.write_text(json.dumps(SCENE) + "\n" + json.dumps({**SCENE, "themes": ["x\x00"]}) + "\n")
    refused_by_cli(
        env, "a file with a NUL on line 2", ["note", "Aria", "--file", str(lines)], "line 2: themes.0"
    )
    text = b"renew the passport \xff"
    refused_by_cli(
        env, "an argument that is not UTF-8", ["note", "Aria", "--kind", "todo", "--text", text], "text"
    )
    key = ["note", "Aria", "--kind", "todo", "--text", "x", "--key", b"k\xff"]
    refused_by_cli(env, "a key that is not UTF-8", key, "idempotency_key")
    refused_by_cli(env, "a query that is not UTF-8", ["query", "Aria", b"tomatoes \xff"], "query")
    with server(env) as base:
        escaped = json.dumps(json.dumps({**SCENE, "feeling": "calm\x00"}))
        refused_by_http(
            base,
            "a scene with an escaped NUL",
            "POST",
            "/v1/beings/Aria/notes",
            f'{{"text": {escaped}}}',
            "feeling",
        )
        body = '{"notes": [{"kind": "todo", "text": "ok"}, {"kind": "todo", "text": "x\\udfff"}]}'
        refused_by_http(
            base,
            "a lone surrogate in a batch",
            "POST",
            "/v1/beings/Aria/notes/batch",
            body,
            "body.notes.1.text",
        )
        refused_by_http(
            base, "a NUL in a soul", "PUT", "/v1/beings/Aria/soul", '{"soul": "warm\\u0000"}', "body.soul"
        )
        refused_by_http(
            base, "a NUL in a query", "POST", "/v1/beings/Aria/query", '{"query": "q\\u0000"}', "body.query"
        )
        answer = httpx.get(f"{base}/v1/beings/Aria/search?q=to%00matoes", timeout=30)
        check(answer.status_code == 422, "HTTP refuses %00 in a URL", answer.text[:200])
    check(head(env) == start, "nothing reached the log", f"head {start} -> {head(env)}")
    fine = json.dumps({**SCENE, "action": "ok \x01 \x7f \U0001f600"})
    check(
        cli(env, "note", "Aria", "--scene", fine).returncode == 0,
        "other control and astral characters are accepted",
    )
    patrol = cli(env, "patrol", "Aria")  # notes become nodes: the views that copy a scene's fields
    check(patrol.returncode == 0, "a patrol turns the notes into nodes", patrol.stderr.strip()[-300:])
    cli(env, "worker", "--once")
    status = json.loads(cli(env, "projections", "status", "--json").stdout)
    healthy = all(v["lag"] == 0 and v["last_error"] is None for v in status)
    check(healthy, "every view caught up, without an error", json.dumps(status)[:500])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="also on PostgreSQL (a fresh schema of this database)")
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    base_env.update(ENGRAM_EMBEDDER="hashing", ENGRAM_LLM="none", PYTHONPATH=str(REPO))
    with tempfile.TemporaryDirectory(prefix="engram-fault-") as tmp:
        scratch = Path(tmp)
        run({**base_env, "ENGRAM_DATA_DIR": str(scratch / "sqlite")}, "sqlite", scratch)
        if args.database_url:
            sys.path.insert(0, str(REPO))  # bench/ is a folder of the checkout, not of the package
            from bench.scratch import scratch_schema

            with scratch_schema(args.database_url, prefix="fault_") as url:
                env = {**base_env, "ENGRAM_DATA_DIR": str(scratch / "pg"), "ENGRAM_DATABASE_URL": url}
                run(env, "postgresql", scratch)
        else:
            print("-- postgresql: skipped (no --database-url)")
    print(f"{'all checks held' if not failures else f'{len(failures)} check(s) FAILED'}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
