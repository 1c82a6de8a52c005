"""What the fault scripts share: a fresh deployment (a temp data dir, and a schema of its own on
PostgreSQL), the `engram` CLI run as a process, and the `held:` / `FAILED:` lines."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

ENGRAM = str(Path(sys.executable).parent / "engram")


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        print(f"held: {what}" if ok else f"FAILED: {what}{f' ({detail})' if detail else ''}", flush=True)
        self.failed += not ok
        return ok

    def exit(self) -> None:
        sys.exit(1 if self.failed else 0)


def arguments(description: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--database-url", help="PostgreSQL (a schema of its own is made and dropped)")
    return parser.parse_args()


@contextmanager
def deployment(database_url: str | None) -> Iterator[dict[str, str]]:
    """The environment of a fresh deployment: ENGRAM_* for a temp data dir (and a fresh schema)."""
    with tempfile.TemporaryDirectory(prefix="engram-fault-") as data_dir:
        env = {
            **os.environ,
            "ENGRAM_DATA_DIR": data_dir,
            "ENGRAM_EMBEDDER": "hashing",
            "ENGRAM_LLM": "none",
            "ENGRAM_LOG_LEVEL": "error",
        }
        if database_url is None:
            yield env
            return
        import psycopg

        schema = f"fault_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            sep = "&" if "?" in database_url else "?"
            yield {**env, "ENGRAM_DATABASE_URL": f"{database_url}{sep}schema={schema}"}
        finally:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def engram(env: dict[str, str], *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`engram ARGS` as a process of its own."""
    return subprocess.run(
        [ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300, check=False, **kwargs
    )


class Served:
    """`engram serve` running: its URL, and its log so far."""

    def __init__(self, url: str, log: IO[str]) -> None:
        self.url, self._log = url, log

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read()


@contextmanager
def serving(env: dict[str, str], *args: str) -> Iterator[Served]:
    """`engram serve --no-auth ARGS` on a free loopback port, stopped after."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(
            [ENGRAM, "serve", "--no-auth", "--port", str(port), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        served = Served(f"http://127.0.0.1:{port}", log)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if httpx.get(f"{served.url}/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            yield served
        finally:
            proc.terminate()
            proc.wait(timeout=60)


@contextmanager
def opened(env: dict[str, str]) -> Iterator[Any]:
    """The deployment opened in this process, as `engram.open` opens it (closed after)."""
    from engram.services.bootstrap import bootstrap, configure_logging
    from engram.services.config import Settings

    settings = Settings(
        data_dir=env["ENGRAM_DATA_DIR"],
        database_url=env.get("ENGRAM_DATABASE_URL"),
        embedder="hashing",
        llm="none",
        log_level="error",
    )
    configure_logging(settings)
    with bootstrap(settings) as e:
        yield e
