"""A projection process SIGKILLed in the middle of a batch loses no event and applies none twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

from domain.being import Being
from domain.node import MemoryNode
from domain.scene import validate_scene_object
from projections import engine
from services.bootstrap import bootstrap
from services.config import Settings
from tests.support import SeededIds, SteppingClock

NODES = 6000
ROOT = Path(__file__).resolve().parents[2]


def _settings_json(settings: Settings) -> str:
    data = json.loads(settings.model_dump_json())
    if settings.database_url is not None:
        data["database_url"] = settings.database_url.get_secret_value()
    return json.dumps(data)


def _kill_during_catch_up(settings: Settings, after_batches: int) -> int:
    """Start the child and SIGKILL it after `after_batches` committed batches; return how many it reported."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_child", _settings_json(settings), "150"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    seen = 0
    for line in child.stdout:
        if line.startswith("batch"):
            seen += 1
            if seen >= after_batches:
                os.kill(child.pid, signal.SIGKILL)  # lands inside the next batch's transaction
                break
        if line.startswith("done"):
            break
    child.wait(timeout=60)
    return seen


def test_sigkill_mid_batch_loses_nothing_and_applies_nothing_twice(make_settings) -> None:
    settings = make_settings()
    e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())
    try:
        being, business, private = Being.register("Aria", e.clock.now())
        e.store.save(being, business, private)
        scene = validate_scene_object({"action": "x", "actors": ["me"], "when": ["2026-01-01"]})
        for _ in range(0, NODES, 200):
            e.store.save(*[MemoryNode.create(uuid4(), scene, business, 0, e.clock.now()) for _ in range(200)])
        head = e.store.head()

        first = _kill_during_catch_up(settings, 3)
        second = _kill_during_catch_up(settings, 5)
        assert first >= 3 and second >= 5
        status = engine.status(e.views.dbs["memory"], e.views.projections["memory"])
        assert 0 < status.position < head, "the kills must land while work remains"

        e.views.ensure()
        read = e.views.read
        root = read.cluster(being.id, business.id)
        assert root is not None
        assert (root["total_count"], root["active_count"]) == (NODES, NODES)
        assert len(read.nodes(being.id)) == NODES
        assert e.views.positions(["memory"]) == {"memory": head}
    finally:
        e.close()
