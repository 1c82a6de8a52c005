"""Fault: a rebuild killed while it fills the vector collections of its new generation (issue #7,
item 3).

`engram projections rebuild vectors` runs as a process and is SIGKILLed as soon as its new
generation's collection exists (Qdrant Edge, the embedded default). Expected: the collection is left
behind, and then dropped by `engram projections gc`, by `engram worker` when it starts, and by the
next rebuild; the collections that serve stay, and queries keep answering.

    .venv/bin/python scripts/faults/orphan_collections.py [--database-url URL]
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from uuid import uuid4

from _harness import ENGRAM, Checks, arguments, deployment, engram, opened


def populate(env: dict[str, str], count: int) -> None:
    """A being with `count` embedded nodes (written in bulk, as patrol would)."""
    from engram.domain.being import Being
    from engram.domain.node import MemoryNode
    from engram.domain.scene import validate_scene_object

    with opened(env) as e:
        being, business, private = Being.register("Aria", e.clock.now())
        e.store.save(being, business, private)
        for start in range(0, count, 500):
            texts = [f"walked by the river, step {i}" for i in range(start, min(count, start + 500))]
            nodes = []
            for text, vector in zip(texts, e.embedder.embed(texts), strict=True):
                node = MemoryNode.create(
                    uuid4(),
                    validate_scene_object({"action": text, "actors": ["me"], "when": ["2026-05-01"]}),
                    business,
                    0,
                    e.clock.now(),
                )
                node.embed(vector, e.clock.now())
                nodes.append(node)
            e.store.save(*nodes)
        e.views.ensure()


def collections(env: dict[str, str]) -> set[str]:
    root = Path(env["ENGRAM_DATA_DIR"]) / "vectors" / "collections"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def killed_rebuild(env: dict[str, str]) -> set[str]:
    """Starts a rebuild of the vectors view and SIGKILLs it once a new collection appears; returns
    the new collections it left."""
    before = collections(env)
    proc = subprocess.Popen(
        [ENGRAM, "projections", "rebuild", "vectors"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not collections(env) - before:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return collections(env) - before


def answers(env: dict[str, str]) -> bool:
    found = engram(env, "query", "Aria", "river", "--no-reactivate", "--json")
    return found.returncode == 0 and "river" in found.stdout


def main() -> None:
    args = arguments(__doc__)
    checks = Checks()
    with deployment(args.database_url) as env:
        populate(env, 3000)
        live = collections(env)

        left = killed_rebuild(env)
        checks.check(bool(left), f"the killed rebuild left {', '.join(sorted(left)) or 'nothing'}")
        gc = engram(env, "projections", "gc")
        checks.check(
            collections(env) == live and answers(env),
            "`engram projections gc` dropped it; the live collections serve",
            gc.stdout + gc.stderr,
        )

        left = killed_rebuild(env)
        worker = subprocess.Popen(
            [ENGRAM, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and collections(env) != live:
            time.sleep(0.2)
        worker.terminate()
        worker.wait(timeout=60)
        checks.check(
            bool(left) and collections(env) == live, "`engram worker` dropped the next one when it started"
        )

        left = killed_rebuild(env)
        rebuilt = engram(env, "projections", "rebuild", "vectors")
        now = collections(env)
        checks.check(
            bool(left) and rebuilt.returncode == 0 and not now & (left | live) and bool(now) and answers(env),
            "the next rebuild dropped the one after, and serves its own collections",
            rebuilt.stderr[-300:],
        )
    checks.exit()


if __name__ == "__main__":
    main()
