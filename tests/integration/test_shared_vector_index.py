"""The embedded vector index shared between processes (ADR 0025), at the level of the index: an owner
in another process (`tests/contract/vector_owner_child.py`) that closes, dies or stops.

Engram's processes on one data directory (serve, worker, mcp, the CLI) are in
`test_embedded_processes.py`; the port itself through an owner in `tests/contract` (`edge-shared`).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram.adapters.vectors import EdgeVectorIndex, SharedEdgeVectorIndex
from engram.adapters.vectors.owner_link import TIMEOUT_S
from engram.projections.vector_index import VectorIndexBusy, VectorPoint
from tests.contract.conftest import owner_process
from tests.integration.http_support import wait_until

DIM = 16
BEING = uuid.UUID("aaaaaaaa-0000-4000-8000-000000000001")


def points(rng: np.random.Generator, n: int, first_position: int) -> list[VectorPoint]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    return [
        VectorPoint(uuid.uuid4(), v, {"being_id": str(BEING), "position": first_position + i})
        for i, v in enumerate(vectors)
    ]


def holder(root: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((root / "owner.lock").read_text())
    return record


def test_a_second_instance_goes_through_the_first_and_takes_over_when_it_closes(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    first, second = SharedEdgeVectorIndex(root), SharedEdgeVectorIndex(root)
    try:
        first.ensure_collection("c", DIM)
        batch = points(np.random.default_rng(1), 50, 1)
        second.upsert("c", batch)  # a flock belongs to an open file: the second is a client, even here
        assert first.owns and not second.owns
        assert holder(root)["pid"] == os.getpid()
        assert first.count("c") == 50

        first.close()
        assert (root / "owner.lock").read_text() == ""  # nobody owns it now
        hits = second.search("c", BEING, batch[7].vector, 1)

        assert second.owns
        assert hits[0].id == batch[7].id and second.count("c", BEING) == 50
    finally:
        first.close()
        second.close()


def test_a_holding_process_takes_over_as_soon_as_the_owner_ends(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    with owner_process(root) as owner:
        index = SharedEdgeVectorIndex(root)
        index.hold()
        assert not index.owns and holder(root)["pid"] == owner.pid
        index.ensure_collection("c", DIM)
    try:
        # No call since: the hold() thread waited for the lock and took the index over.
        assert wait_until(lambda: index.owns, timeout=10)
        assert holder(root)["pid"] == os.getpid() and index.collection_exists("c")
    finally:
        index.close()


def test_a_killed_owner_hands_over_and_no_write_is_lost_or_doubled(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    rng = np.random.default_rng(2)
    batches = [points(rng, 200, 1 + 200 * i) for i in range(30)]
    index = SharedEdgeVectorIndex(root)
    written: list[int] = []
    failed: list[BaseException] = []

    def write() -> None:
        try:
            index.ensure_collection("c", DIM)
            for i, batch in enumerate(batches):
                index.upsert("c", batch)
                written.append(i)
        except BaseException as exc:
            failed.append(exc)

    try:
        with owner_process(root) as owner:
            writer = threading.Thread(target=write)
            writer.start()
            assert wait_until(lambda: len(written) >= 3, timeout=60)
            owner.kill()  # SIGKILL, batches in flight
            owner.wait()
            writer.join(timeout=120)
        assert not writer.is_alive() and failed == []
        assert index.owns and holder(root)["pid"] == os.getpid()
        everything = [p for batch in batches for p in batch]
        assert index.count("c") == len(everything)  # nothing lost, nothing twice
        found = {p.id: p for p in index.retrieve("c", BEING, [p.id for p in everything], with_vectors=True)}
        assert len(found) == len(everything)
        for p in everything[::97]:
            assert found[p.id].payload == p.payload
            assert np.allclose(found[p.id].vector, p.vector / np.linalg.norm(p.vector), atol=1e-5)
    finally:
        index.close()
    # What the killed owner wrote is on disk: the engine alone reopens it.
    engine = EdgeVectorIndex(root)
    try:
        assert engine.count("c") == len(everything)
    finally:
        engine.close()


def test_a_stopped_owner_is_named_in_one_line_within_a_bounded_time(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    with owner_process(root) as owner:
        linked = SharedEdgeVectorIndex(root)
        linked.ensure_collection("c", DIM)  # a link made before the owner stopped
        os.kill(owner.pid, signal.SIGSTOP)
        try:
            for index in (SharedEdgeVectorIndex(root), linked):  # a new process, and a call in flight
                started = time.monotonic()
                with pytest.raises(VectorIndexBusy) as caught:
                    index.count("c")
                took = time.monotonic() - started
                message = str(caught.value)
                assert "\n" not in message
                assert f"`contract-owner` (pid {owner.pid}, since " in message
                assert "stopped" in message and f"kill -CONT {owner.pid}" in message
                assert took < 3 * TIMEOUT_S + 5
        finally:
            os.kill(owner.pid, signal.SIGCONT)
        assert linked.count("c") == 0  # resumed: the same process answers again
        linked.close()


def test_an_unreachable_index_is_a_retryable_503_over_http() -> None:
    from engram.adapters.http.problems import status_for
    from engram.projections.vector_index import ServiceUnavailable

    assert status_for(VectorIndexBusy("held by `engram serve` (pid 1), which does not answer")) == 503
    assert status_for(ServiceUnavailable("the owner went away 3 times during one call; retry")) == 503
