"""Memory nodes: one remembered scene each (spec 000, Layer 1)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain import decay
from engram.domain.base import BeingScopedAggregate
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import (
    CrossBeingReference,
    DeadNodeCannotBeAbsorbed,
    EmbeddingMismatch,
    InvalidInput,
    InvalidTransition,
    NodeNotDecayed,
    PinnedNodeCannotDie,
)
from engram.domain.scene import Scene, SceneInput

CONSOLIDATION_BONUS = 0.05
"""Importance a survivor gains per merge group (spec ❹), capped at 1.0."""


class NodeStatus(StrEnum):
    ACTIVE = "active"
    DYING = "dying"
    DEAD = "dead"


class ReactivationSource(StrEnum):
    """Which read reactivated a node; the increments follow the spec's table (❺)."""

    RECALL = "recall"
    RECALL_MEMORY = "recall_memory"
    SEARCH_MEMORY = "search_memory"
    QUERY = "query"


def reactivation_increment(source: ReactivationSource, status: NodeStatus) -> int:
    """+2 for dead nodes reached by `recall_memory` or `search_memory`, +1 otherwise."""
    if status == NodeStatus.DEAD and source in (
        ReactivationSource.RECALL_MEMORY,
        ReactivationSource.SEARCH_MEMORY,
    ):
        return 2
    return 1


class MemoryNode(BeingScopedAggregate):
    TOPIC = "engram.MemoryNode"
    # The state a snapshot holds: version 2 adds `expires_at` and `sensitive` (ADR 0049). Snapshots
    # taken before (every 10th event of a node) load as a node that never expires and is not sensitive.
    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state.update(expires_at=None, sensitive=False)

    class Event(Aggregate.Event):
        TOPIC = "engram.MemoryNode.Event"
        being_id: UUID

    class Created(Event, Aggregate.Created):
        """Version 2 carries its note's expiry and sensitivity (ADR 0046): reads leave out a node past
        `expires_at` or sensitive. A version 1 node never expires and is not sensitive."""

        TOPIC = "engram.MemoryNode.Created"
        class_version = 2
        scene: dict[str, Any]
        feeling: str
        importance: float
        themes: list[str]
        emotion: dict[str, float] | None
        cluster_id: UUID
        source_note_id: UUID | None
        source_ref: str | None
        activation_cycle: int
        expires_at: datetime | None
        sensitive: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(expires_at=None, sensitive=False)

    class Embedded(Event):
        """The vector, in an event of its own so that rebuilds never call an embedder."""

        TOPIC = "engram.MemoryNode.Embedded"
        class_version = 1
        embedding: Embedding

        def apply(self, node: MemoryNode) -> None:
            node.embedding = self.embedding

    class Reembedded(Embedded):
        """A vector of another model replacing the node's (`engram embeddings migrate`, ADR 0071). A
        subclass: everything that reads a vector from `Embedded` reads this one too."""

        TOPIC = "engram.MemoryNode.Reembedded"
        class_version = 1

    class MovedToCluster(Event):
        TOPIC = "engram.MemoryNode.MovedToCluster"
        class_version = 1
        cluster_id: UUID
        from_cluster_id: UUID

        def apply(self, node: MemoryNode) -> None:
            node.cluster_id = self.cluster_id

    class MovedByUndo(MovedToCluster):
        """An undo (ADR 0078): a node a cluster merge or split had moved goes back, or a node that
        joined a split-off cluster since goes with it into the cluster it is folded back into. A
        `MovedToCluster`, so what reads a move reads this one too; `undo_id` names the undo."""

        TOPIC = "engram.MemoryNode.MovedByUndo"
        class_version = 1
        undo_id: UUID

    class Pinned(Event):
        TOPIC = "engram.MemoryNode.Pinned"
        class_version = 1

        def apply(self, node: MemoryNode) -> None:
            node.pinned = True
            if node.status == NodeStatus.DYING:
                node.status = NodeStatus.ACTIVE

    class Unpinned(Event):
        TOPIC = "engram.MemoryNode.Unpinned"
        class_version = 1

        def apply(self, node: MemoryNode) -> None:
            node.pinned = False

    class FlaggedDying(Event):
        TOPIC = "engram.MemoryNode.FlaggedDying"
        class_version = 1
        cycle: int

        def apply(self, node: MemoryNode) -> None:
            node.status = NodeStatus.DYING

    class MadeDead(Event):
        """Spec ❹ `make_dead`: a dying node without a merge partner."""

        TOPIC = "engram.MemoryNode.MadeDead"
        class_version = 1
        cycle: int
        reason: str

        def apply(self, node: MemoryNode) -> None:
            node.status = NodeStatus.DEAD
            node.read_since_death = False

    class Absorbed(Event):
        """Spec ❹: merged into a survivor; the node is dead from now on."""

        TOPIC = "engram.MemoryNode.Absorbed"
        class_version = 1
        survivor_id: UUID
        cycle: int

        def apply(self, node: MemoryNode) -> None:
            node.status = NodeStatus.DEAD
            node.absorbed_into = self.survivor_id
            node.fresh = False
            node.read_since_death = False

    class AbsorbedNodes(Event):
        """Spec ❹: the survivor's side of a merge. Version 2 records the survivor's expiry and
        sensitivity after it (the latest expiry of all, none if one never expires; sensitive if one
        is): replay reads them, never the clock. Version 1 merges were of nodes that had neither."""

        TOPIC = "engram.MemoryNode.AbsorbedNodes"
        class_version = 2
        absorbed_ids: list[UUID]
        when_entries: list[dict[str, str]]
        importance: float
        expires_at: datetime | None
        sensitive: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(expires_at=None, sensitive=False)

        def apply(self, node: MemoryNode) -> None:
            node.scene = {**node.scene, "when": [*node.scene["when"], *self.when_entries]}
            node.importance = self.importance
            node.fresh = False
            node.expires_at = self.expires_at
            node.sensitive = self.sensitive

    class FreshnessCleared(Event):
        TOPIC = "engram.MemoryNode.FreshnessCleared"
        class_version = 1

        def apply(self, node: MemoryNode) -> None:
            node.fresh = False

    class Reactivated(Event):
        """A read reached the node: its decay clock restarts at `cycle` (ADR 0004)."""

        TOPIC = "engram.MemoryNode.Reactivated"
        class_version = 1
        increment: int
        cycle: int
        source: str

        def apply(self, node: MemoryNode) -> None:
            node.reactivation_count += self.increment
            node.last_activated_at = self.timestamp
            node.last_activated_cycle = self.cycle
            if node.status == NodeStatus.DYING:
                node.status = NodeStatus.ACTIVE
            elif node.status == NodeStatus.DEAD:
                node.read_since_death = True

    class Revived(Event):
        """Spec ❺: a dead node whose effective importance is above the threshold again.

        `restarts_clock`: the node's session count is 0 at `cycle`, as the spec's is (its ❷ skipped
        the node while it was dead; ADR 0002). Version 1 events, recorded before that rule, left the
        count running from the last read, and replay as they were recorded.
        """

        TOPIC = "engram.MemoryNode.Revived"
        class_version = 2
        cycle: int
        restarts_clock: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["restarts_clock"] = False

        def apply(self, node: MemoryNode) -> None:
            node.status = NodeStatus.ACTIVE
            node.absorbed_into = None
            node.read_since_death = False
            if self.restarts_clock:
                node.last_activated_cycle = self.cycle

    class AbsorptionUndone(Event):
        """An undo (ADR 0072): the survivor's side of a merge reversed. It records the state the
        survivor had before the merge (its `when` list, importance, expiry, sensitivity), so that a
        replay reads it and never looks back at older events."""

        TOPIC = "engram.MemoryNode.AbsorptionUndone"
        class_version = 1
        undo_id: UUID
        released_ids: list[UUID]
        when: list[Any]
        importance: float
        expires_at: datetime | None
        sensitive: bool

        def apply(self, node: MemoryNode) -> None:
            node.scene = {**node.scene, "when": list(self.when)}
            node.importance = self.importance
            node.expires_at = self.expires_at
            node.sensitive = self.sensitive

    class Unabsorbed(Event):
        """An undo (ADR 0072): a node a merge absorbed is alive again, in the status it had before."""

        TOPIC = "engram.MemoryNode.Unabsorbed"
        class_version = 1
        undo_id: UUID
        status: str
        fresh: bool

        def apply(self, node: MemoryNode) -> None:
            node.status = self.status
            node.absorbed_into = None
            node.fresh = self.fresh
            node.read_since_death = False

    def __init__(
        self,
        being_id: UUID,
        scene: dict[str, Any],
        feeling: str,
        importance: float,
        themes: list[str],
        emotion: dict[str, float] | None,
        cluster_id: UUID,
        source_note_id: UUID | None,
        source_ref: str | None,
        activation_cycle: int,
        expires_at: datetime | None,
        sensitive: bool,
    ) -> None:
        self.being_id = being_id
        self.scene = scene
        self.feeling = feeling
        self.importance = importance
        self.themes = themes
        self.emotion = emotion
        self.cluster_id = cluster_id
        self.source_note_id = source_note_id
        self.source_ref = source_ref
        self.status: str = NodeStatus.ACTIVE.value
        self.fresh = True
        self.pinned = False
        self.reactivation_count = 0
        self.last_activated_at: datetime = self.created_on
        self.last_activated_cycle = activation_cycle
        self.embedding: Embedding | None = None
        self.absorbed_into: UUID | None = None
        # Revival (❺) is driven by reads: a node that died is revived only if something read it since.
        self.read_since_death = False
        self.expires_at = expires_at  # the latest expiry of the notes that fed it; None: never
        self.sensitive = sensitive  # fed by a sensitive note: never recalled, never sent to an LLM

    @classmethod
    def create(
        cls,
        node_id: UUID,
        scene: SceneInput,
        cluster: Cluster,
        being_cycle: int,
        at: datetime,
        *,
        source_note_id: UUID | None = None,
        source_ref: str | None = None,
        expires_at: datetime | None = None,
        sensitive: bool = False,
    ) -> MemoryNode:
        """A fresh node (spec ❶) with `importance = clamp(0, 1, importance ?? 0.5)`; `expires_at` and
        `sensitive` are its note's (ADR 0046)."""
        cluster.require_alive()
        return cls._create(
            cls.Created,
            id=node_id,
            being_id=cluster.being_id,
            scene=scene.scene.model_dump(mode="json", exclude_none=True),
            feeling=scene.feeling,
            importance=decay.clamp_importance(scene.importance),
            themes=list(scene.themes),
            emotion=scene.emotion.model_dump() if scene.emotion else None,
            cluster_id=cluster.id,
            source_note_id=source_note_id,
            source_ref=source_ref,
            activation_cycle=being_cycle,
            expires_at=expires_at,
            sensitive=sensitive,
            timestamp=at,
        )

    # -- derived state --------------------------------------------------------

    def scene_model(self) -> Scene:
        return Scene.model_validate(self.scene)

    def session_count(self, being_cycle: int) -> int:
        return decay.session_count(being_cycle, self.last_activated_cycle)

    def effective_importance(self, being_cycle: int) -> float:
        return decay.effective_importance(self.importance, self.session_count(being_cycle))

    def is_hidden(self, now: datetime) -> bool:
        """Left out of reads: sensitive, or past the expiry of every note that fed it (ADR 0046)."""
        return self.sensitive or (self.expires_at is not None and self.expires_at <= now)

    @property
    def dying_cycle(self) -> int:
        return decay.dying_cycle(self.importance, self.last_activated_cycle)

    # -- commands -------------------------------------------------------------

    def embed(self, embedding: Embedding, at: datetime) -> None:
        if self.embedding is not None and not self.embedding.same_space(embedding):
            raise EmbeddingMismatch(
                f"node {self.id} holds a {self.embedding.model}/{self.embedding.dim} vector; "
                f"a {embedding.model}/{embedding.dim} vector is not mixed in",
            )
        self._emit(self.Embedded, at, embedding=embedding)

    def reembed(self, embedding: Embedding, at: datetime) -> bool:
        """Replace the vector with one of another model (a migration); False if it has this one's."""
        if self.embedding is not None and self.embedding.same_space(embedding):
            return False
        self._emit(self.Reembedded, at, embedding=embedding)
        return True

    def move_to(self, cluster: Cluster, at: datetime) -> None:
        cluster.require_same_being(self.being_id)
        cluster.require_alive()
        if cluster.id != self.cluster_id:
            self._emit(self.MovedToCluster, at, cluster_id=cluster.id, from_cluster_id=self.cluster_id)

    def move_by_undo(self, cluster: Cluster, undo_id: UUID, at: datetime) -> None:
        """Move back, reversing a cluster merge or split (ADR 0078)."""
        cluster.require_same_being(self.being_id)
        cluster.require_alive()
        if cluster.id == self.cluster_id:
            raise InvalidTransition(f"node {self.id} is in cluster {cluster.id} already")
        self._emit(
            self.MovedByUndo, at, cluster_id=cluster.id, from_cluster_id=self.cluster_id, undo_id=undo_id
        )

    def pin(self, at: datetime) -> None:
        if self.status == NodeStatus.DEAD:
            raise InvalidTransition("a dead node is not pinned; recall it first so that it revives")
        if not self.pinned:
            self._emit(self.Pinned, at)

    def unpin(self, at: datetime) -> None:
        if self.pinned:
            self._emit(self.Unpinned, at)

    def flag_dying(self, being_cycle: int, at: datetime) -> None:
        if self.pinned:
            raise PinnedNodeCannotDie(f"node {self.id} is pinned and never decays")
        if self.status != NodeStatus.ACTIVE:
            raise InvalidTransition(f"only an active node is flagged dying; node {self.id} is {self.status}")
        if not decay.is_at_or_below_threshold(self.importance, self.session_count(being_cycle)):
            raise NodeNotDecayed(
                f"node {self.id} has effective importance {self.effective_importance(being_cycle):.4f} "
                f"> {decay.DYING_THRESHOLD} at cycle {being_cycle}"
            )
        self._emit(self.FlaggedDying, at, cycle=being_cycle)

    def make_dead(self, being_cycle: int, reason: str, at: datetime) -> None:
        if self.pinned:
            raise PinnedNodeCannotDie(f"node {self.id} is pinned and never dies")
        if self.status != NodeStatus.DYING:
            raise InvalidTransition(f"only a dying node is made dead; node {self.id} is {self.status}")
        self._emit(self.MadeDead, at, cycle=being_cycle, reason=reason)

    def absorb(self, others: list[MemoryNode], being_cycle: int, at: datetime) -> None:
        """Spec ❹: this node survives and absorbs `others`, which become dead."""
        if self.status == NodeStatus.DEAD:
            raise InvalidTransition(f"a dead node ({self.id}) does not survive a merge")
        if not others:
            raise InvalidInput("a merge absorbs at least one node")
        seen: set[UUID] = set()
        for other in others:
            if other.being_id != self.being_id:
                raise CrossBeingReference("nodes of different beings are never merged")
            if other.id == self.id or other.id in seen:
                raise InvalidInput(f"node {other.id} appears twice in one merge")
            if other.status == NodeStatus.DEAD:
                raise DeadNodeCannotBeAbsorbed(f"node {other.id} is dead and cannot be absorbed again")
            if other.pinned:
                raise PinnedNodeCannotDie(f"node {other.id} is pinned; absorbing it would kill it")
            seen.add(other.id)
        entries = []
        for other in others:
            date = other.scene_model().first_date() or at.date().isoformat()
            entries.append({"date": date, "action": other.scene["action"]})
        importance = min(1.0, self.importance + CONSOLIDATION_BONUS)
        expiries = [self.expires_at, *(o.expires_at for o in others)]
        expires_at = None if any(e is None for e in expiries) else max(e for e in expiries if e is not None)
        sensitive = self.sensitive or any(o.sensitive for o in others)
        for other in others:
            other._emit(other.Absorbed, at, survivor_id=self.id, cycle=being_cycle)
        self._emit(
            self.AbsorbedNodes,
            at,
            absorbed_ids=[o.id for o in others],
            when_entries=entries,
            importance=importance,
            expires_at=expires_at,
            sensitive=sensitive,
        )

    def clear_fresh(self, at: datetime) -> None:
        if self.fresh:
            self._emit(self.FreshnessCleared, at)

    def reactivate(self, source: ReactivationSource, being_cycle: int, at: datetime) -> int:
        increment = reactivation_increment(source, NodeStatus(self.status))
        self._emit(self.Reactivated, at, increment=increment, cycle=being_cycle, source=source.value)
        return increment

    def revive(self, being_cycle: int, at: datetime) -> None:
        """Spec ❺ for a dead node that a read reached since it died (ADR 0004); its session count
        restarts at `being_cycle` (ADR 0002)."""
        if self.status != NodeStatus.DEAD:
            raise InvalidTransition(f"only a dead node revives; node {self.id} is {self.status}")
        if not self.read_since_death:
            raise NodeNotDecayed(f"node {self.id} stays dead: nothing has read it since it died")
        if not decay.revives(self.importance):
            raise NodeNotDecayed(
                f"node {self.id} stays dead: its importance {self.importance:.4f} is at or below "
                f"{decay.DYING_THRESHOLD}, so even a fresh read does not lift it above the threshold"
            )
        self._emit(self.Revived, at, cycle=being_cycle, restarts_clock=True)

    def undo_absorption(self, before: MemoryNode, released: list[UUID], undo_id: UUID, at: datetime) -> None:
        """Reverse a merge this node survived: `before` is this node as it was just before it."""
        if before.id != self.id:
            raise InvalidInput("the state before a merge must be the survivor's own")
        self._emit(
            self.AbsorptionUndone,
            at,
            undo_id=undo_id,
            released_ids=list(released),
            when=list(before.scene["when"]),
            importance=before.importance,
            expires_at=before.expires_at,
            sensitive=before.sensitive,
        )

    def unabsorb(self, before: MemoryNode, cluster: Cluster, undo_id: UUID, at: datetime) -> None:
        """Bring back a node a merge absorbed, as `before` (this node just before the merge) was."""
        if self.status != NodeStatus.DEAD or self.absorbed_into is None:
            raise InvalidTransition(f"node {self.id} is not an absorbed node")
        if before.status == NodeStatus.DEAD:
            raise InvalidTransition(f"node {self.id} was already dead before the merge")
        cluster.require_same_being(self.being_id)
        if cluster.id != self.cluster_id:
            raise InvalidInput(f"node {self.id} lives in cluster {self.cluster_id}, not {cluster.id}")
        cluster.require_alive()
        self._emit(self.Unabsorbed, at, undo_id=undo_id, status=before.status, fresh=before.fresh)
