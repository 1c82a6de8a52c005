"""The embedded vector index shared between processes (ADR 0036), at the level of the index: an owner
in another process (`tests/contract/vector_owner_child.py`) that closes, dies or stops.

Engram's processes on one data directory (serve, worker, mcp, the CLI) are in
`test_embedded_processes.py`; the port itself through an owner in `tests/contract` (`edge-shared`).
"""

from __future__ import annotations

import functools
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
from engram.services.errors import StorageFull
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


def three_processes(root: Path) -> tuple[list[SharedEdgeVectorIndex], list[VectorPoint]]:
    """Three instances on `root`, as three processes would be (a flock belongs to an open file): the
    first owns the index, with 20 points in collection `c`; the others reach it through it."""
    indexes = [SharedEdgeVectorIndex(root) for _ in range(3)]
    indexes[0].ensure_collection("c", DIM)
    batch = points(np.random.default_rng(4), 20, 1)
    indexes[0].upsert("c", batch)
    return indexes, batch


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
            # Threads of one process that need the index at once wait for one search of the owner, not
            # one after the other (6 in a row would take 6 x TIMEOUT_S).
            fresh, errors = SharedEdgeVectorIndex(root), []
            started = time.monotonic()
            threads = [
                threading.Thread(target=lambda: errors.append(_error(fresh.count, "c"))) for _ in range(6)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            took = time.monotonic() - started
            assert len(errors) == 6 and all(isinstance(e, VectorIndexBusy) for e in errors)
            assert took < 3 * TIMEOUT_S + 5
        finally:
            os.kill(owner.pid, signal.SIGCONT)
        assert linked.count("c") == 0  # resumed: the same process answers again
        linked.close()
        fresh.close()


def _error(fn: Any, *args: Any) -> BaseException | None:
    try:
        fn(*args)
    except BaseException as exc:
        return exc
    return None


def test_an_unreachable_index_is_a_retryable_503_over_http() -> None:
    from engram.adapters.http.problems import status_for
    from engram.projections.vector_index import ServiceUnavailable

    assert status_for(VectorIndexBusy("held by `engram serve` (pid 1), which does not answer")) == 503
    assert status_for(ServiceUnavailable("the owner went away 3 times during one call; retry")) == 503


def test_large_upserts_travel_in_bounded_messages_and_keep_the_batch_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.adapters.vectors import owner_link

    monkeypatch.setattr(owner_link, "UPSERT_MESSAGE_BYTES", 100 * DIM * 4)  # 100 points a message
    sent: list[int] = []
    request = owner_link.OwnerClient._request

    def counting(self: owner_link.OwnerClient, message: Any) -> Any:
        if message[0] == "upsert":
            sent.append(len(message[1][1].ids) // 16)
        return request(self, message)

    monkeypatch.setattr(owner_link.OwnerClient, "_request", counting)
    root = tmp_path / "vectors"
    owner, client = SharedEdgeVectorIndex(root), SharedEdgeVectorIndex(root)
    try:
        owner.ensure_collection("c", DIM)
        batch = points(np.random.default_rng(3), 450, 1)
        stale = VectorPoint(batch[5].id, batch[6].vector, {**batch[5].payload, "position": 0})
        newer = VectorPoint(batch[7].id, batch[8].vector, {**batch[7].payload, "position": 10_000})
        bad = VectorPoint(uuid.uuid4(), batch[0].vector, {"being_id": str(BEING)})  # no position

        with pytest.raises(ValueError, match="position"):
            client.upsert("c", [*batch, bad])
        assert owner.count("c") == 0 and sent == []  # checked before anything was sent

        client.upsert("c", [*batch, stale, newer])  # a point twice: the latest state wins
        assert not client.owns and sent == [100, 100, 100, 100, 50]
        assert owner.count("c") == 450
        [five, seven] = owner.retrieve("c", BEING, [batch[5].id, batch[7].id], with_vectors=True)
        assert five.payload["position"] == 6 and seven.payload["position"] == 10_000
        assert np.allclose(seven.vector, batch[8].vector / np.linalg.norm(batch[8].vector), atol=1e-5)
    finally:
        client.close()
        owner.close()


@pytest.mark.parametrize("dropped_by", ["owner", "another-process"])
def test_a_drop_waits_for_the_searches_of_other_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dropped_by: str
) -> None:
    (owner, reader, other), batch = three_processes(tmp_path / "vectors")
    searching, release = threading.Event(), threading.Event()
    search = EdgeVectorIndex.search

    @functools.wraps(search)  # the client names the call by the method's name
    def slow_search(self: EdgeVectorIndex, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "vector-owner-connection":  # a client's call, in the owner
            searching.set()
            release.wait(30)
        return search(self, *args, **kwargs)

    def drop() -> None:
        if dropped_by == "another-process":
            other.drop_collection("c")
        else:  # what the vectors projection does when a rebuild switched (projections/vectors.py)
            owner.drop_collection("c")

    monkeypatch.setattr(EdgeVectorIndex, "search", slow_search)
    found: list[int] = []
    try:
        searcher = threading.Thread(
            target=lambda: found.append(len(reader.search("c", BEING, batch[0].vector, 5)))
        )
        searcher.start()
        assert searching.wait(30)
        dropper = threading.Thread(target=drop)
        dropper.start()
        dropper.join(timeout=1.0)
        assert dropper.is_alive()  # held while the other process's search runs
        release.set()
        searcher.join(timeout=30)
        dropper.join(timeout=30)
        assert found == [5] and not owner.collection_exists("c")
    finally:
        release.set()
        for index in (other, reader, owner):
            index.close()


def test_only_the_port_is_served_and_only_to_holders_of_the_key(tmp_path: Path) -> None:
    from engram.adapters.vectors.owner_link import OwnerClient, connect
    from engram.adapters.vectors.ownership import KEY_FILE

    root = tmp_path / "vectors"
    owner = SharedEdgeVectorIndex(root)
    try:
        owner.ensure_collection("c", DIM)
        address = holder(root)["address"]
        assert (Path(address).stat().st_mode & 0o777) == 0o600
        assert ((root / KEY_FILE).stat().st_mode & 0o777) == 0o600
        with pytest.raises(RuntimeError, match="does not share this process's key"):
            connect(address, b"x" * 32)
        link = OwnerClient.connect(address, (root / KEY_FILE).read_bytes())
        try:
            assert link.holder.pid == os.getpid()
            for method in ("close", "_apply", "__init__"):
                with pytest.raises(ValueError, match="not a method of the vector index"):
                    link.call(method, (), {})
            assert link.call("count", ("c",), {}) == 0
        finally:
            link.close()
        assert owner.collection_exists("c")  # still open: `close` was refused
    finally:
        owner.close()


def test_a_data_directory_too_deep_for_a_socket_path_still_shares_its_index(tmp_path: Path) -> None:
    root = tmp_path.joinpath(*(["deeper-than-a-unix-socket-path-may-be"] * 3), "vectors")
    owner, client = SharedEdgeVectorIndex(root), SharedEdgeVectorIndex(root)
    try:
        owner.ensure_collection("c", DIM)
        client.upsert("c", points(np.random.default_rng(5), 3, 1))
        address = holder(root)["address"]
        assert not address.startswith(str(tmp_path)) and len(address.encode()) < 100
        assert owner.owns and not client.owns and owner.count("c") == 3
    finally:
        client.close()
        owner.close()


def test_a_long_call_holds_up_only_its_caller_and_outlives_the_silence_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (owner, builder, reader), batch = three_processes(tmp_path / "vectors")
    building, searched = threading.Event(), threading.Event()
    optimize = EdgeVectorIndex.optimize

    @functools.wraps(optimize)  # the client names the call by the method's name
    def slow_optimize(self: EdgeVectorIndex, collection: str) -> None:
        building.set()
        assert searched.wait(30)
        time.sleep(TIMEOUT_S + 2)  # longer than a call may stay silent before its owner is pinged
        optimize(self, collection)

    monkeypatch.setattr(EdgeVectorIndex, "optimize", slow_optimize)
    failed: list[BaseException] = []

    def build() -> None:
        try:
            builder.optimize("c")
        except BaseException as exc:
            failed.append(exc)

    try:
        thread = threading.Thread(target=build)
        thread.start()
        assert building.wait(30)
        assert [h.id for h in reader.search("c", BEING, batch[3].vector, 1)] == [batch[3].id]  # meanwhile
        searched.set()
        thread.join(timeout=120)
        assert not thread.is_alive() and failed == []
        assert not builder.owns and not reader.owns
    finally:
        searched.set()
        for index in (reader, builder, owner):
            index.close()


def test_a_full_disk_in_the_owner_reaches_the_caller_as_storage_full_naming_the_path(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    # The owner keeps more free space than any disk has: it refuses every write (ADR 0030).
    owner = SharedEdgeVectorIndex(root, disk_reserve_bytes=1 << 62)
    client = SharedEdgeVectorIndex(root)
    try:
        assert not owner.collection_exists("c") and owner.owns
        with pytest.raises(StorageFull) as caught:
            client.ensure_collection("c", DIM)
        assert not client.owns
        assert caught.value.path == str(root) and caught.value.code == "storage_full"
        assert str(caught.value).count("no space left") == 1
        assert not client.collection_exists("c")  # nothing half-written
    finally:
        client.close()
        owner.close()
