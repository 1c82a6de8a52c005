"""A node's expiry and sensitivity in the domain (ADR 0046, 0049): set at creation, combined by a
merge and recorded in its event, upcast from version 1 events, and `is_hidden` at a given now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import InvalidTransition
from engram.domain.node import MemoryNode
from engram.domain.note import Lifecycle, Note, NoteKind
from engram.domain.scene import validate_scene_object

T0 = datetime(2026, 11, 1, tzinfo=UTC)
SCENE = validate_scene_object({"action": "walked by the river", "actors": ["me"], "when": ["2026-10-01"]})


@pytest.fixture
def cluster() -> Cluster:
    _, business, _ = Being.register("Aria", T0)
    return business


def _node(cluster: Cluster, expires_at: datetime | None = None, sensitive: bool = False) -> MemoryNode:
    return MemoryNode.create(uuid4(), SCENE, cluster, 0, T0, expires_at=expires_at, sensitive=sensitive)


def test_a_node_is_hidden_when_sensitive_or_past_its_expiry(cluster: Cluster) -> None:
    plain, secret = _node(cluster), _node(cluster, sensitive=True)
    short = _node(cluster, expires_at=T0 + timedelta(days=1))
    assert not plain.is_hidden(T0 + timedelta(days=999))
    assert secret.is_hidden(T0)
    assert not short.is_hidden(T0 + timedelta(hours=23))
    assert short.is_hidden(T0 + timedelta(days=1))  # at its expiry instant it is gone


@pytest.mark.parametrize(
    ("expiries", "expected"),
    [
        ([1, 3], 3),  # the latest of all
        ([1, None], None),  # one never expires: the survivor never does
        ([None, None], None),
    ],
)
def test_a_merge_keeps_the_latest_expiry(cluster: Cluster, expiries: list[Any], expected: Any) -> None:
    survivor, other = (
        _node(cluster, expires_at=T0 + timedelta(days=d) if d is not None else None) for d in expiries
    )
    survivor.absorb([other], 1, T0)
    want = T0 + timedelta(days=expected) if expected is not None else None
    assert survivor.expires_at == want
    [event] = [e for e in survivor.collect_events() if isinstance(e, MemoryNode.AbsorbedNodes)]
    assert event.expires_at == want  # recorded, so that replay never reads a clock


def test_a_merge_with_a_sensitive_node_is_sensitive(cluster: Cluster) -> None:
    survivor, secret = _node(cluster), _node(cluster, sensitive=True)
    survivor.absorb([secret], 1, T0)
    assert survivor.sensitive


def test_version_1_events_upcast_to_a_node_that_never_expires_and_is_not_sensitive() -> None:
    created: dict[str, Any] = {"action": "x"}
    MemoryNode.Created.upcast_v1_v2(created)
    absorbed: dict[str, Any] = {"importance": 0.5}
    MemoryNode.AbsorbedNodes.upcast_v1_v2(absorbed)
    assert created["expires_at"] is None and created["sensitive"] is False
    assert absorbed["expires_at"] is None and absorbed["sensitive"] is False


def test_only_packable_notes_are_embedded() -> None:
    being_id = uuid4()
    vector = Embedding.from_floats("m", [1.0, 0.0])
    log = Note.take(uuid4(), being_id, NoteKind.LOG, "asked about the weather", T0)
    log.embed(vector, T0)
    assert log.embedding == vector
    secret = Note.take(
        uuid4(),
        being_id,
        NoteKind.LOG,
        "a secret",
        T0,
        lifecycle=Lifecycle(NoteKind.LOG, T0, sensitivity="sensitive"),
    )
    with pytest.raises(InvalidTransition):
        secret.embed(vector, T0)
    scene = Note.take(
        uuid4(), being_id, NoteKind.SCENE, '{"action": "x", "actors": ["me"], "when": ["2026-01-01"]}', T0
    )
    with pytest.raises(InvalidTransition):
        scene.embed(vector, T0)


def test_a_snapshot_taken_before_version_2_loads_as_a_node_that_never_expires(cluster: Cluster) -> None:
    from eventsourcing.domain import Snapshot

    node = _node(cluster, expires_at=T0 + timedelta(days=1), sensitive=True)
    snapshot = Snapshot.take(node)
    assert snapshot.state.get("class_version") == 2
    old_state = {
        k: v for k, v in snapshot.state.items() if k not in ("expires_at", "sensitive", "class_version")
    }
    old = Snapshot(
        originator_id=snapshot.originator_id,
        originator_version=snapshot.originator_version,
        timestamp=snapshot.timestamp,
        topic=snapshot.topic,
        state=old_state,
    )
    loaded = old.mutate(None)
    assert isinstance(loaded, MemoryNode)
    assert (loaded.expires_at, loaded.sensitive) == (None, False)
    assert (snapshot.mutate(None).expires_at, snapshot.mutate(None).sensitive) == (node.expires_at, True)
