"""Clusters group a being's nodes: two roots (`Business`, `Private`) and topic sub-clusters."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.base import BeingScopedAggregate
from engram.domain.errors import ClusterDeleted, CrossBeingReference, InvalidInput, RootClusterImmutable
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
