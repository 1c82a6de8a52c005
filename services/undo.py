"""`engram undo DECISION_ID`: reverse one recorded decision with compensating events (ADR 0072).

A decision is named `ID@VERSION`: the aggregate and the version of the event that made the change, as
`engram history` prints it — a consolidation's survivor node and its `AbsorbedNodes` event, a
superseded note and its `Superseded` event (a manual supersede), an entity map and its `Merged`
event, or a cluster: its `Deleted` event for a merge (spec ❼), its `Created` for a split (spec ❻),
whose moves and dependents `undo_clusters.py` reads (ADR 0078). Undo never deletes an event: it
saves an `Undo` record and the compensating events (`AbsorptionUndone` on the survivor, `Unabsorbed`
on each absorbed node; `SupersedeUndone` and `SupersedesUndone` on the two notes;
`EntityMap.Unmerged`; `Cluster.MergeUndone` or `SplitUndone` and `MovedByUndo` on the nodes) in one
transaction, so the views follow and a rebuild gives the same views.

A decision that later events depend on (the survivor absorbed more nodes, or was itself absorbed) is
refused with the dependents named; with `cascade` the dependents are undone first, newest first.
What no undo can reverse (an absorbed node revived since, its cluster deleted) is refused always.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from engram.domain.cluster import Cluster
from engram.domain.entities import EntityMap
from engram.domain.errors import InvalidInput
from engram.domain.node import MemoryNode
from engram.domain.note import Note, SupersedeReason
from engram.domain.undo import Undo, undo_id_for
from engram.services.beings import parse_uuid, resolve_being
from engram.services.errors import Conflict, NotFound
from engram.services.ports import Clock
from engram.services.store import AggregateStore
from engram.services.undo_clusters import (
    CLUSTER_MERGE,
    CLUSTER_SPLIT,
    ClusterChange,
    Members,
    cluster_dependents,
    joiners,
    merge_change,
    move_decision,
    node_dependents,
    split_change,
)

log = structlog.get_logger("engram.services.undo")

CONSOLIDATION = "consolidation"
ALIAS_MERGE = "alias-merge"
SUPERSEDE = "supersede"
NO_REASON = "no reason given"

# Events on an absorbed node after its merge that an undo may pass over: a read of a dead node, and a
# move back by the undo of a later cluster merge or split.
_HARMLESS_AFTER_ABSORBED = (MemoryNode.Reactivated, MemoryNode.MovedByUndo)


class AlreadyUndone(Conflict):
    code = "already_undone"


class UndoRefused(Conflict):
    """Later events depend on the decision: the message names them."""

    code = "undo_refused"


@dataclass(frozen=True)
class UndoStep:
    """One decision to reverse: the survivor at `version`, and the nodes it absorbed then."""

    decision: str
    kind: str
    survivor: UUID
    version: int
    released: list[Any]
    absorbed_versions: dict[UUID, int]
    into: str | None = None
    joined: tuple[UUID, ...] = ()
    """A split: the nodes that joined the split-off cluster since, folded back with it."""

    def describe(self) -> str:
        ids = ", ".join(str(i) for i in self.released)
        if self.kind == CLUSTER_MERGE:
            return (
                f"undo {self.kind} {self.decision}: cluster {self.survivor} is alive again and takes back "
                f"{len(self.released)} node{'' if len(self.released) == 1 else 's'} from {self.into} ({ids})"
            )
        if self.kind == CLUSTER_SPLIT:
            joined = f"; with {len(self.joined)} node(s) that joined it since" if self.joined else ""
            return (
                f"undo {self.kind} {self.decision}: cluster {self.survivor} is folded back into {self.into}, "
                f"its {len(self.released)} node{'' if len(self.released) == 1 else 's'} with it ({ids}){joined}"
            )
        if self.kind == ALIAS_MERGE:
            return (
                f"undo {self.kind} {self.decision}: entity {self.released[0]} no longer reads as {self.into}"
            )
        if self.kind == SUPERSEDE:
            return f"undo {self.kind} {self.decision}: note {self.survivor} is live again (was superseded by {ids})"
        return f"undo {self.kind} {self.decision}: node {self.survivor} gives back {ids}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "kind": self.kind,
            "survivor": str(self.survivor),
            "released": [str(i) for i in self.released],
            **({"into": self.into} if self.into is not None else {}),
            **({"joined": [str(i) for i in self.joined]} if self.joined else {}),
        }


@dataclass
class UndoPlan:
    decision: str
    being_id: UUID
    steps: list[UndoStep] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "being_id": str(self.being_id),
            "steps": [s.as_dict() for s in self.steps],
            "dependents": list(self.dependents),
            "blockers": list(self.blockers),
        }


@dataclass(frozen=True)
class UndoResult:
    plan: UndoPlan
    applied: bool

    def as_dict(self) -> dict[str, Any]:
        return {**self.plan.as_dict(), "applied": self.applied}


def parse_decision(decision: str) -> tuple[UUID, int]:
    ref, sep, version = decision.strip().partition("@")
    node_id = parse_uuid(ref)
    if not sep or node_id is None or not version.isdigit() or int(version) < 1:
        raise InvalidInput(
            f"{decision!r} is not a decision id; a decision is ID@VERSION as `engram history` shows it: "
            "a survivor node's AbsorbedNodes event, a note's Superseded event, an entity map's Merged "
            "event, a merged cluster's Deleted event or a split-off cluster's Created event"
        )
    return node_id, int(version)


class UndoCommands:
    def __init__(self, store: AggregateStore, clock: Clock, members: Members | None = None) -> None:
        self.store = store
        self.clock = clock
        # A cluster's nodes now (the memory view): who joined a split-off cluster since (ADR 0078).
        self.members = members

    # -- planning -------------------------------------------------------------------------------

    def plan(self, decision: str, *, being: str | None = None, cascade: bool = False) -> UndoPlan:
        """What undoing `decision` would do; `being`, when given, must own it (else `NotFound`)."""
        node_id, version = parse_decision(decision)
        name = f"{node_id}@{version}"
        being_id = self._being_of(node_id, name)
        if being is not None and resolve_being(self.store, being).id != being_id:
            raise NotFound(f"decision {name} not found")
        if self._undone(being_id, name):
            raise AlreadyUndone(f"decision {name} is already undone")
        plan = UndoPlan(name, being_id)
        self._collect(being_id, node_id, version, plan, cascade=cascade, seen=set())
        return plan

    def _being_of(self, aggregate_id: UUID, name: str) -> UUID:
        events = self.store.events(aggregate_id, lte=1)
        if not events or not isinstance(
            events[0], MemoryNode.Created | Note.Noted | EntityMap.Started | Cluster.Created
        ):
            raise NotFound(f"decision {name} not found: no node, note, entity map or cluster {aggregate_id}")
        return UUID(str(events[0].being_id))

    def _collect(
        self, being_id: UUID, node_id: UUID, version: int, plan: UndoPlan, *, cascade: bool, seen: set[str]
    ) -> None:
        name = f"{node_id}@{version}"
        if name in seen:
            return
        seen.add(name)
        events = self.store.events(node_id)
        if not events or getattr(events[0], "being_id", None) != being_id:
            raise NotFound(f"decision {name} not found: no node or note {node_id} in this being")
        if version > len(events):
            raise NotFound(f"decision {name} not found: {node_id} has versions 1 to {len(events)}")
        merged = events[version - 1]
        if isinstance(merged, Note.Superseded):
            self._supersede(name, node_id, merged, events[version:], plan)
            return
        if isinstance(merged, EntityMap.Merged):
            self._alias_merge(name, node_id, merged, events[version:], plan)
            return
        if type(merged) is Cluster.Deleted:
            self._cluster_change(
                being_id, merge_change(self.store, name, node_id, merged), plan, cascade, seen
            )
            return
        if isinstance(merged, Cluster.Created):
            self._cluster_change(
                being_id, split_change(self.store, name, node_id, merged), plan, cascade, seen
            )
            return
        if not isinstance(merged, MemoryNode.AbsorbedNodes):
            raise InvalidInput(
                f"{name} is a {type(merged).__name__} event, not a decision undo can reverse "
                "(a consolidation: the survivor's AbsorbedNodes event; a supersede: the note's Superseded "
                "event; a cluster merge: the merged cluster's Deleted event; a split: the new cluster's "
                "Created event)"
            )
        absorbed_versions: dict[UUID, int] = {}
        # Cluster merges or splits that moved an absorbed node since (a dead node moves with its
        # cluster, ADR 0078): dependents, undone first so that it is back in its cluster.
        moved: list[str] = []
        for absorbed_id in merged.absorbed_ids:
            absorbed_versions[absorbed_id] = self._check_absorbed(absorbed_id, node_id, merged, plan, moved)
        later_decisions = [self._dependent(being_id, node_id, later) for later in events[version:]]
        for dependent in dict.fromkeys([*moved, *later_decisions]):
            if dependent is None:
                continue
            if cascade:
                dep_node, dep_version = parse_decision(dependent)
                self._collect(being_id, dep_node, dep_version, plan, cascade=True, seen=seen)
            else:
                plan.dependents.append(dependent)
        plan.steps.append(
            UndoStep(name, CONSOLIDATION, node_id, version, list(merged.absorbed_ids), absorbed_versions)
        )

    def _supersede(self, name: str, note_id: UUID, superseded: Any, later: list[Any], plan: UndoPlan) -> None:
        """A manual supersede: the old note comes back. A new soul or a merge summary is its own act,
        undone as a whole or not at all (not yet: ADR 0072)."""
        if superseded.reason != SupersedeReason.MANUAL:
            raise InvalidInput(
                f"{name} is a supersede by a {superseded.reason}, not a decision undo can reverse "
                "(only a manual supersede is)"
            )
        if any(isinstance(e, Note.SupersedeUndone) for e in later):
            raise AlreadyUndone(f"decision {name} is already undone")
        plan.steps.append(
            UndoStep(name, SUPERSEDE, note_id, superseded.originator_version, [superseded.by], {})
        )

    def _alias_merge(self, name: str, map_id: UUID, merged: Any, later: list[Any], plan: UndoPlan) -> None:
        """An entity alias merge (ADR 0056): undone by `EntityMap.Unmerged`, if it is still in force."""
        for e in later:
            if isinstance(e, EntityMap.Unmerged) and e.alias == merged.alias:
                plan.blockers.append(
                    f"{merged.alias} was unmerged since (version {e.originator_version}): "
                    "the merge is no longer in force"
                )
                return
        plan.steps.append(
            UndoStep(
                name, ALIAS_MERGE, map_id, merged.originator_version, [merged.alias], {}, into=merged.into
            )
        )

    def _cluster_change(
        self, being_id: UUID, change: ClusterChange, plan: UndoPlan, cascade: bool, seen: set[str]
    ) -> None:
        """A cluster merge or split (ADR 0078): its later dependents, then its step."""
        name = f"{change.cluster_id}@{change.version}"
        what = "merge" if change.kind == CLUSTER_MERGE else "split"
        if not change.moved:
            plan.blockers.append(f"no node moves were found beside {name} in the log")
        dependents: list[str] = []
        # The clusters the undo brings nodes back into must be alive by then: merged away since is a
        # dependent decision, deleted otherwise a blocker.
        alive = (change.cluster_id, change.other_id) if change.kind == CLUSTER_SPLIT else ()
        for cluster_id in alive:
            found, blockers = cluster_dependents(self.store, cluster_id, change.position)
            dependents += found
            plan.blockers += blockers
        if change.kind == CLUSTER_MERGE:
            parent = self.store.get(Cluster, self.store.get(Cluster, change.cluster_id).parent_id)
            if parent.deleted:
                plan.blockers.append(f"cluster {change.cluster_id}'s parent {parent.id} was deleted since")
        later: list[tuple[str, Any]] = []
        for node_id, version in change.moved.items():
            later += node_dependents(self.store, node_id, version, what)
        joined: list[UUID] = []
        if change.kind == CLUSTER_SPLIT and self.members is not None:
            joined, moves = joiners(self.store, self.members(being_id, change.cluster_id), change)
            later += [("move", m) for m in moves]
        for kind, item in later:
            if kind == "blocker":
                plan.blockers.append(item)
                continue
            if kind == "move":
                decision = move_decision(self.store, item)
                if decision is None:
                    plan.blockers.append(
                        f"node {item.originator_id} was moved by hand since the {what} "
                        f"(MovedToCluster at version {item.originator_version})"
                    )
                    continue
            else:
                decision = self._dependent(being_id, item.originator_id, item)
                if decision is None:
                    continue
            dependents.append(decision)
        for decision in dict.fromkeys(d for d in dependents if not self._undone(being_id, d)):
            if cascade:
                dep_id, dep_version = parse_decision(decision)
                self._collect(being_id, dep_id, dep_version, plan, cascade=True, seen=seen)
            elif decision not in plan.dependents:
                plan.dependents.append(decision)
        plan.steps.append(
            UndoStep(
                name,
                change.kind,
                change.cluster_id,
                change.version,
                list(change.moved),
                dict(change.moved),
                into=str(change.other_id),
                joined=tuple(joined),
            )
        )

    def _undone(self, being_id: UUID, decision: str) -> bool:
        return self.store.find(Undo, undo_id_for(being_id, decision)) is not None

    def _dependent(self, being_id: UUID, node_id: UUID, later: Any) -> str | None:
        """The decision a later event of the survivor belongs to, if it is a merge still in force."""
        if isinstance(later, MemoryNode.AbsorbedNodes):
            decision = f"{node_id}@{later.originator_version}"
        elif isinstance(later, MemoryNode.Absorbed):
            [merge] = [
                e
                for e in self.store.events(later.survivor_id)
                if isinstance(e, MemoryNode.AbsorbedNodes)
                and node_id in e.absorbed_ids
                and e.timestamp == later.timestamp
            ]
            decision = f"{later.survivor_id}@{merge.originator_version}"
        else:
            return None
        return None if self._undone(being_id, decision) else decision

    def _check_absorbed(
        self, absorbed_id: UUID, survivor: UUID, merged: Any, plan: UndoPlan, moved: list[str]
    ) -> int:
        events = self.store.events(absorbed_id)
        [absorbed] = [
            e
            for e in events
            if isinstance(e, MemoryNode.Absorbed)
            and e.survivor_id == survivor
            and e.timestamp == merged.timestamp
        ]
        for later in events[absorbed.originator_version :]:
            if type(later) is MemoryNode.MovedToCluster:
                decision = move_decision(self.store, later)
                if decision is not None:
                    if not self._undone(UUID(str(later.being_id)), decision):
                        moved.append(decision)
                    continue
            if not isinstance(later, _HARMLESS_AFTER_ABSORBED):
                plan.blockers.append(
                    f"node {absorbed_id} has changed since the merge ({type(later).__name__} at version "
                    f"{later.originator_version})"
                )
        node = self.store.get(MemoryNode, absorbed_id)
        cluster = self.store.get(Cluster, node.cluster_id)
        if cluster.deleted:
            plan.blockers.append(f"node {absorbed_id}'s cluster {cluster.id} was deleted since the merge")
        return int(absorbed.originator_version)

    # -- undoing --------------------------------------------------------------------------------

    def undo(
        self,
        decision: str,
        *,
        reason: str = "",
        being: str | None = None,
        cascade: bool = False,
        dry_run: bool = False,
    ) -> UndoResult:
        plan = self.plan(decision, being=being, cascade=cascade)
        if plan.blockers:
            raise UndoRefused(f"decision {plan.decision} cannot be undone: " + "; ".join(plan.blockers))
        if plan.dependents:
            raise UndoRefused(
                f"decision {plan.decision} has later decisions that depend on it: "
                + ", ".join(plan.dependents)
                + " (undo them first, or use --cascade)"
            )
        if dry_run:
            return UndoResult(plan, applied=False)
        reason = reason.strip() or NO_REASON
        for step in plan.steps:
            self._apply(
                plan.being_id, step, reason, None if step.decision == plan.decision else plan.decision
            )
        return UndoResult(plan, applied=True)

    def _apply(self, being_id: UUID, step: UndoStep, reason: str, cascade_of: str | None) -> None:
        if step.kind in (CLUSTER_MERGE, CLUSTER_SPLIT):
            self._apply_cluster(being_id, step, reason, cascade_of)
            return
        if step.kind == SUPERSEDE:
            self._apply_supersede(being_id, step, reason)
            return
        if step.kind == ALIAS_MERGE:
            at = self.clock.now()
            [alias] = step.released
            undo = Undo.record(being_id, step.decision, step.kind, reason, [str(step.survivor), alias], at)
            entities = self.store.get(EntityMap, step.survivor)
            entities.unmerge(alias, at)
            self.store.save(undo, entities)
            return
        at = self.clock.now()
        undo = Undo.record(
            being_id,
            step.decision,
            step.kind,
            reason,
            [str(step.survivor), *(str(i) for i in step.released)],
            at,
            cascade_of=cascade_of,
        )
        survivor = self.store.get(MemoryNode, step.survivor, being_id=being_id)
        before = self.store.get(MemoryNode, step.survivor, version=step.version - 1)
        survivor.undo_absorption(before, step.released, undo.id, at)
        changed: list[MemoryNode] = [survivor]
        for absorbed_id in step.released:
            node = self.store.get(MemoryNode, absorbed_id, being_id=being_id)
            node_before = self.store.get(
                MemoryNode, absorbed_id, version=step.absorbed_versions[absorbed_id] - 1
            )
            node.unabsorb(node_before, self.store.get(Cluster, node.cluster_id), undo.id, at)
            changed.append(node)
        self.store.save(undo, *changed)

    def _apply_cluster(self, being_id: UUID, step: UndoStep, reason: str, cascade_of: str | None) -> None:
        """A merge: the merged cluster alive again, its nodes moved back. A split: the split-off
        cluster's nodes now (those it took, and those that joined it since) moved back into the
        cluster it came from, then it is folded (ADR 0078). One transaction."""
        at = self.clock.now()
        cluster = self.store.get(Cluster, step.survivor, being_id=being_id)
        other = self.store.get(Cluster, UUID(str(step.into)), being_id=being_id)
        if step.kind == CLUSTER_SPLIT and self.members is not None:
            # Read now, not when planned: a cascade may just have brought nodes back into it.
            ids = self.members(being_id, cluster.id)
        else:
            ids = list(step.released)
        undo = Undo.record(
            being_id,
            step.decision,
            step.kind,
            reason,
            [str(cluster.id), str(other.id), *(str(i) for i in ids)],
            at,
            cascade_of=cascade_of,
        )
        nodes = self.store.get_many(MemoryNode, ids, being_id=being_id)
        if step.kind == CLUSTER_MERGE:
            cluster.undo_merge(undo.id, at)
            for node in nodes:
                node.move_by_undo(cluster, undo.id, at)
            self.store.save(undo, cluster, *nodes)
        else:
            for node in nodes:
                node.move_by_undo(other, undo.id, at)
            cluster.undo_split(other, undo.id, at)
            self.store.save(undo, *nodes, cluster)
        log.info("cluster_decision_undone", decision=step.decision, kind=step.kind, nodes=len(nodes))

    def _apply_supersede(self, being_id: UUID, step: UndoStep, reason: str) -> None:
        at = self.clock.now()
        [by_id] = step.released
        undo = Undo.record(being_id, step.decision, step.kind, reason, [str(step.survivor), str(by_id)], at)
        old = self.store.get(Note, step.survivor, being_id=being_id)
        by = self.store.get(Note, by_id, being_id=being_id)
        old.undo_supersede(by, undo.id, at)
        self.store.save(undo, old, by)
