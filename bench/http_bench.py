"""What the HTTP API adds to a call: the same `recall` and `query` in-process and over HTTP (not a test).

One data directory with one being holding `--scenes` memory nodes (the bundled demo scenes, varied).
First the calls run in this process (`engram.reading.recall/query`), then `engram serve` runs as a
separate process on loopback (as deployed) and the same calls go through HTTP with a keep-alive
httpx client and a being token. Both sides do identical work (recall reactivates the nodes it
returns, so both write one event per call); the difference of the percentiles is the HTTP
overhead: routing, auth, JSON, uvicorn, the socket and the client.

    engram bench http [--scenes 300] [--calls 300] [--embedder offline|hashing] [--json] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench import demo_scenes
from bench.machine import finish, machine_info
from engram.adapters.logging import configure_logging
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.tokens import TokenService

BEING = "Bench"
QUERIES = [
    "the Atlas migration with Theo",
    "climbing with Lena",
    "what did Mina say about the garden",
    "baking bread on Sunday",
    "the incident report at night",
]


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "p50_ms": round(pick(0.5) * 1000, 3),
        "p95_ms": round(pick(0.95) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def paired(
    local: Callable[[int], Any], remote: Callable[[int], Any], n: int, warmup: int = 20
) -> tuple[list[float], list[float]]:
    """Alternate the two calls with the same argument; return both lists of durations in seconds."""
    for i in range(warmup):
        local(i)
        remote(i)
    local_s, remote_s = [], []
    for i in range(n):
        started = time.perf_counter()
        local(i)
        middle = time.perf_counter()
        remote(i)
        local_s.append(middle - started)
        remote_s.append(time.perf_counter() - middle)
    return local_s, remote_s


def scenes(count: int) -> list[str]:
    base = demo_scenes()
    out = []
    for i in range(count):
        scene = dict(base[i % len(base)])
        scene["action"] = f"{scene['action']} (take {i})"
        out.append(json.dumps(scene))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(data: Path, embedder: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(data),
        "ENGRAM_EMBEDDER": embedder,
        "ENGRAM_LLM": "none",
        "ENGRAM_LOG_LEVEL": "error",
        "ENGRAM_HTTP_PORT": str(free_port()),
        "ENGRAM_HTTP_RATE_LIMIT_PER_S": "1000000",
        "ENGRAM_HTTP_RATE_LIMIT_BURST": "1000000",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    server = subprocess.Popen(
        [sys.executable, "-c", "from engram.adapters.cli.main import main; main()", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, f"http://127.0.0.1:{env['ENGRAM_HTTP_PORT']}"


def wait_ready(server: subprocess.Popen[bytes], url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit("engram serve did not start")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenes", type=int, default=300)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--embedder", choices=["offline", "hashing"], default="offline")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    configure_logging("error")
    machine = machine_info()

    with tempfile.TemporaryDirectory(prefix="engram-bench-http-") as tmp:
        data = Path(tmp) / "data"
        settings = Settings(data_dir=data, embedder=args.embedder, llm="none")
        results: dict[str, dict[str, float]] = {}

        engram = bootstrap(settings)
        try:
            engram.beings.register(BEING)
            texts = scenes(args.scenes)
            for i in range(0, len(texts), 500):
                engram.notes.take_many(BEING, [NoteInput(text=t) for t in texts[i : i + 500]])
            engram.patrol(BEING)
            engram.views.ensure()
            token = TokenService(engram).issue(being=BEING, label="bench").token
        finally:
            engram.close()
        # Reads reactivate nodes (one more event each), so both sides work on identical copies and
        # alternate call by call: the same history, the same machine noise.
        served = Path(tmp) / "served"
        shutil.copytree(data, served)
        server, url = start_server(served, args.embedder)
        engram = bootstrap(settings)
        try:
            wait_ready(server, url)
            reading = engram.reading
            with httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
            ) as client:
                calls: dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]] = {
                    "recall": (
                        lambda i: reading.recall(BEING, QUERIES[i % len(QUERIES)]),
                        lambda i: client.post(
                            f"/v1/beings/{BEING}/recall", json={"query": QUERIES[i % len(QUERIES)]}
                        ).raise_for_status(),
                    ),
                    "query": (
                        lambda i: reading.query(BEING, QUERIES[i % len(QUERIES)], 10),
                        lambda i: client.post(
                            f"/v1/beings/{BEING}/query", json={"query": QUERIES[i % len(QUERIES)], "k": 10}
                        ).raise_for_status(),
                    ),
                }
                for name, (local, remote) in calls.items():
                    local_s, remote_s = paired(local, remote, args.calls)
                    results[f"{name} in-process"] = percentiles(local_s)
                    results[f"{name} over HTTP"] = percentiles(remote_s)
                    results[f"{name}: HTTP adds"] = percentiles(
                        [r - x for x, r in zip(local_s, remote_s, strict=True)]
                    )
        finally:
            engram.close()
            server.send_signal(signal.SIGINT)
            server.wait(30)

    report: dict[str, Any] = {
        "benchmark": "http_overhead",
        "machine": machine,
        "setup": {"scenes": args.scenes, "calls": args.calls, "embedder": args.embedder, "backend": "sqlite"},
        "results": results,
    }
    finish(report, args.json_out)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"HTTP overhead — {machine['summary']}")
    print(f"{args.scenes} nodes, {args.calls} calls each, embedder {args.embedder}, SQLite, loopback\n")
    print(f"{'':<22} {'p50 ms':>9} {'p95 ms':>9} {'mean ms':>9}")
    for name, r in results.items():
        print(f"{name:<22} {r['p50_ms']:>9.2f} {r['p95_ms']:>9.2f} {r['mean_ms']:>9.2f}")
    print(
        "\n`HTTP adds` is the distribution of per-pair differences (HTTP call minus the in-process call next to it)."
    )


if __name__ == "__main__":
    main()
