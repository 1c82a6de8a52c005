"""Clusters group a being's nodes: two roots (`Business`, `Private`) and topic sub-clusters."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import (
    ClusterDeleted,
    CrossBeingReference,
    InvalidInput,
    InvalidTransition,
    RootClusterImmutable,
)
from engram.domain.text import check_text

ROOT_NAMES = ("Business", "Private")
MAX_CLUSTER_NAME_CHARS = 120


def _clean_name(name: str) -> str:
    clean = " ".join(check_text("cluster name", name).split())
    if not clean:
        raise InvalidInput("a cluster's name must not be empty")
    if len(clean) > MAX_CLUSTER_NAME_CHARS:
        raise InvalidInput(f"a cluster's name has at most {MAX_CLUSTER_NAME_CHARS} characters")
    return clean


class Cluster(BeingScopedAggregate):
    TOPIC = "engram.Cluster"

    class Event(Aggregate.Event):
        TOPIC = "engram.Cluster.Event"
        being_id: UUID

    class Created(Event, Aggregate.Created):
        TOPIC = "engram.Cluster.Created"
        class_version = 1
        name: str
        parent_id: UUID | None
        is_root: bool

    class Renamed(Event):
        TOPIC = "engram.Cluster.Renamed"
        class_version = 1
        name: str

        def apply(self, cluster: Cluster) -> None:
            cluster.name = self.name

    class Deleted(Event):
        TOPIC = "engram.Cluster.Deleted"
        class_version = 1
        reason: str

        def apply(self, cluster: Cluster) -> None:
            cluster.deleted = True

    class SplitUndone(Deleted):
        """An undo (ADR 0078): a cluster split off another (spec ❻) is folded back into it, its nodes
        moved there first. A `Deleted`, so what reads a deletion reads this one too."""

        TOPIC = "engram.Cluster.SplitUndone"
        class_version = 1
        undo_id: UUID
        into_id: UUID

    class MergeUndone(Event):
        """An undo (ADR 0078): a cluster a small-cluster merge (spec ❼) deleted is alive again. It
        carries its name, parent and creation time, so the views make its row again without looking
        back at older events."""

        TOPIC = "engram.Cluster.MergeUndone"
        class_version = 1
        undo_id: UUID
        name: str
        parent_id: UUID
        created_at: datetime

        def apply(self, cluster: Cluster) -> None:
            cluster.deleted = False

    def __init__(self, being_id: UUID, name: str, parent_id: UUID | None, is_root: bool) -> None:
        self.being_id = being_id
        self.name = name
        # A root's parent is itself (spec 000: "self-referential parent_id").
        self.parent_id: UUID = parent_id if parent_id is not None else self.id
        self.is_root = is_root
        self.deleted = False

    @classmethod
    def create_root(cls, cluster_id: UUID, being_id: UUID, name: str, at: datetime) -> Cluster:
        if name not in ROOT_NAMES:
            raise InvalidInput(f"root clusters are {ROOT_NAMES}, not {name!r}")
        return cls._create(
            cls.Created,
            id=cluster_id,
            being_id=being_id,
            name=name,
            parent_id=None,
            is_root=True,
            timestamp=at,
        )

    @classmethod
    def create_sub(cls, cluster_id: UUID, parent: Cluster, name: str, at: datetime) -> Cluster:
        parent.require_alive()
        return cls._create(
            cls.Created,
            id=cluster_id,
            being_id=parent.being_id,
            name=_clean_name(name),
            parent_id=parent.id,
            is_root=False,
            timestamp=at,
        )

    @classmethod
    def split_off(cls, cluster_id: UUID, source: Cluster, name: str, at: datetime) -> Cluster:
        """Spec ❻: a new sub-cluster beside `source`, under the same parent. Roots are never split."""
        if source.is_root:
            raise RootClusterImmutable(f"root cluster {source.name!r} is never split")
        source.require_alive()
        return cls._create(
            cls.Created,
            id=cluster_id,
            being_id=source.being_id,
            name=_clean_name(name),
            parent_id=source.parent_id,
            is_root=False,
            timestamp=at,
        )

    def require_alive(self) -> None:
        if self.deleted:
            raise ClusterDeleted(f"cluster {self.id} was deleted")

    def require_same_being(self, being_id: UUID) -> None:
        if self.being_id != being_id:
            raise CrossBeingReference("a node never joins a cluster of another being")

    def rename(self, name: str, at: datetime) -> None:
        if self.is_root:
            raise RootClusterImmutable(f"root cluster {self.name!r} keeps its name")
        self.require_alive()
        self._emit(self.Renamed, at, name=_clean_name(name))

    def delete(self, reason: str, at: datetime) -> None:
        if self.is_root:
            raise RootClusterImmutable(f"root cluster {self.name!r} is never deleted")
        self.require_alive()
        self._emit(self.Deleted, at, reason=reason)

    def undo_split(self, into: Cluster, undo_id: UUID, at: datetime) -> None:
        """Fold this cluster back into `into`, the cluster it was split off (its nodes moved first)."""
        if self.is_root:
            raise RootClusterImmutable(f"root cluster {self.name!r} is never deleted")
        self.require_alive()
        into.require_same_being(self.being_id)
        into.require_alive()
        self._emit(
            self.SplitUndone,
            at,
            reason=f"split undone: folded back into {into.id}",
            undo_id=undo_id,
            into_id=into.id,
        )

    def undo_merge(self, undo_id: UUID, at: datetime) -> None:
        """Bring back this cluster, deleted by a merge into another (its nodes are moved back after)."""
        if not self.deleted:
            raise InvalidTransition(f"cluster {self.id} is not deleted")
        self._emit(
            self.MergeUndone,
            at,
            undo_id=undo_id,
            name=self.name,
            parent_id=self.parent_id,
            created_at=self.created_on,
        )
