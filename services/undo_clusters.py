"""Undo of a cluster merge (spec ❼) or split (spec ❻): what the log says each did (ADR 0078).

Neither step records which nodes it moved in one event: a merge is the merged cluster's `Deleted`
(reason `merged into TARGET`) saved in one transaction after its nodes' `MovedToCluster`; a split is
the new cluster's `Created` saved just before its nodes' moves. Those moves are therefore the events
right beside the decision's position in the log, and they are read from there: a bounded read that
stops at the first event that is not one of them, never a scan of the log.

A later event of a moved node that depends on the decision (moved again by another merge or split, a
consolidation that took it in) is a dependent decision, undone first by a cascade; one that no undo
can reverse (the node died, or was moved by hand) blocks the undo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from engram.domain.cluster import Cluster
from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode
from engram.services.store import AggregateStore

CLUSTER_MERGE = "cluster-merge"
CLUSTER_SPLIT = "cluster-split"
MERGED_INTO = "merged into "
_READ = 256
"""Events read at a time beside a decision's position."""

# A moved node's later events that do not depend on where it sits: reads, vectors, pins, and the
# effects of undos (a consolidation undone, a later merge or split undone).
HARMLESS_AFTER_MOVE = (
    MemoryNode.Reactivated,
    MemoryNode.Embedded,
    MemoryNode.FreshnessCleared,
    MemoryNode.Pinned,
    MemoryNode.Unpinned,
    MemoryNode.AbsorptionUndone,
    MemoryNode.Unabsorbed,
    MemoryNode.MovedByUndo,
)
_DEATHS = (MemoryNode.FlaggedDying, MemoryNode.MadeDead, MemoryNode.Revived)

Members = Callable[[UUID, UUID], list[UUID]]
"""The ids of the nodes in a cluster now, every status (the memory view, caught up)."""


@dataclass(frozen=True)
class ClusterChange:
    """One merge or split as the log has it."""

    kind: str
    cluster_id: UUID
    """A merge: the cluster merged away. A split: the cluster split off."""
    other_id: UUID
    """A merge: the cluster its nodes joined. A split: the cluster it was split off."""
    version: int
    position: int
    moved: dict[UUID, int]
    """The nodes moved, in log order, each with the version of its move."""


def _is_merge_move(e: Any, source: UUID, target: UUID, deleted: Any) -> bool:
    return (
        type(e) is MemoryNode.MovedToCluster
        and e.from_cluster_id == source
        and e.cluster_id == target
        and e.timestamp == deleted.timestamp
    )


def _is_split_move(e: Any, new: UUID, created: Any) -> bool:
    return type(e) is MemoryNode.MovedToCluster and e.cluster_id == new and e.timestamp == created.timestamp


def moves_before(store: AggregateStore, position: int, match: Callable[[Any], bool]) -> dict[UUID, int]:
    """The matching events just before `position`, back to the first that does not match."""
    found: list[tuple[UUID, int]] = []
    end = position - 1
    while end >= 1:
        start = max(1, end - _READ + 1)
        for _, e in reversed(store.decoded_events(start, end - start + 1, stop=end)):
            if not match(e):
                return dict(reversed(found))
            found.append((e.originator_id, e.originator_version))
        end = start - 1
    return dict(reversed(found))


def moves_after(store: AggregateStore, position: int, match: Callable[[Any], bool]) -> dict[UUID, int]:
    """The matching events just after `position`, up to the first that does not match."""
    found: dict[UUID, int] = {}
    start = position + 1
    while True:
        batch = store.decoded_events(start, _READ)
        for _, e in batch:
            if not match(e):
                return found
            found[e.originator_id] = e.originator_version
        if len(batch) < _READ:
            return found
        start = batch[-1][0] + 1


def merge_change(store: AggregateStore, name: str, cluster_id: UUID, deleted: Any) -> ClusterChange:
    """The small-cluster merge whose `Deleted` event is `deleted`."""
    reason = str(deleted.reason)
    target = UUID(reason.removeprefix(MERGED_INTO)) if reason.startswith(MERGED_INTO) else None
    if target is None:
        raise InvalidInput(
            f"{name} deleted cluster {cluster_id} ({reason}), not a merge: not a decision undo can reverse"
        )
    position = store.positions(cluster_id)[deleted.originator_version]
    moved = moves_before(store, position, lambda e: _is_merge_move(e, cluster_id, target, deleted))
    return ClusterChange(CLUSTER_MERGE, cluster_id, target, deleted.originator_version, position, moved)


def split_change(store: AggregateStore, name: str, cluster_id: UUID, created: Any) -> ClusterChange:
    """The split that made the cluster whose `Created` event is `created`."""
    position = store.positions(cluster_id)[1]
    moved = moves_after(store, position, lambda e: _is_split_move(e, cluster_id, created))
    sources = {store.events(node_id, lte=v)[-1].from_cluster_id for node_id, v in moved.items()}
    if created.is_root or len(sources) != 1:
        raise InvalidInput(
            f"{name} created cluster {cluster_id} without splitting another: not a decision undo can reverse"
        )
    [source] = sources
    if source == created.parent_id:
        raise InvalidInput(
            f"{name} is the birth of sub-cluster {cluster_id} from its root (ADR 0007), not a split: "
            "not a decision undo can reverse"
        )
    return ClusterChange(CLUSTER_SPLIT, cluster_id, source, 1, position, moved)


def move_decision(store: AggregateStore, move: Any) -> str | None:
    """The decision a plain `MovedToCluster` belongs to: a merge (the cluster it left was deleted at
    the same instant, merged into the one it joined) or a split (the cluster it joined was split off
    the one it left at the same instant); None for any other move."""
    for e in store.events(move.from_cluster_id):
        if (
            type(e) is Cluster.Deleted
            and e.timestamp == move.timestamp
            and e.reason == f"{MERGED_INTO}{move.cluster_id}"
        ):
            return f"{move.from_cluster_id}@{e.originator_version}"
    created = store.events(move.cluster_id, lte=1)
    if (
        created
        and isinstance(created[0], Cluster.Created)
        and created[0].timestamp == move.timestamp
        and created[0].parent_id != move.from_cluster_id
    ):
        return f"{move.cluster_id}@1"
    return None


def cluster_dependents(store: AggregateStore, cluster_id: UUID, after: int) -> tuple[list[str], list[str]]:
    """(dependent decisions, blockers) among a cluster's events after log position `after`: a merge
    of it into another is a decision; any other deletion blocks."""
    positions = store.positions(cluster_id)
    dependents: list[str] = []
    blockers: list[str] = []
    for e in store.events(cluster_id):
        if positions[e.originator_version] <= after:
            continue
        if isinstance(e, Cluster.Deleted):
            if type(e) is Cluster.Deleted and str(e.reason).startswith(MERGED_INTO):
                dependents.append(f"{cluster_id}@{e.originator_version}")
            else:
                blockers.append(
                    f"cluster {cluster_id} was deleted since ({e.reason}, version {e.originator_version})"
                )
    return dependents, blockers


def node_dependents(store: AggregateStore, node_id: UUID, version: int, what: str) -> list[tuple[str, Any]]:
    """A moved node's later events that matter: ("move", event) for a plain move, ("consolidation",
    event) for a merge that took it in or that it survived, ("blocker", message) for the rest."""
    out: list[tuple[str, Any]] = []
    for later in store.events(node_id)[version:]:
        if isinstance(later, HARMLESS_AFTER_MOVE):
            continue
        if type(later) is MemoryNode.MovedToCluster:
            out.append(("move", later))
        elif isinstance(later, MemoryNode.AbsorbedNodes | MemoryNode.Absorbed):
            out.append(("consolidation", later))
        else:
            happened = "died" if isinstance(later, _DEATHS) else "changed"
            out.append(
                (
                    "blocker",
                    f"node {node_id} {happened} since the {what} "
                    f"({type(later).__name__} at version {later.originator_version})",
                )
            )
    return out


def joiners(
    store: AggregateStore, members: list[UUID], change: ClusterChange
) -> tuple[list[UUID], list[Any]]:
    """The nodes in a split-off cluster now that the split did not move there: (those made in it or
    brought back into it by an undo, which fold back with it; the moves that brought the others)."""
    along: list[UUID] = []
    moves: list[Any] = []
    for node_id in members:
        if node_id in change.moved:
            continue
        entered = [
            e
            for e in store.events(node_id)
            if isinstance(e, MemoryNode.Created | MemoryNode.MovedToCluster)
            and e.cluster_id == change.cluster_id
        ][-1]
        if type(entered) is MemoryNode.MovedToCluster:
            moves.append(entered)
        else:
            along.append(node_id)
    return along, moves
