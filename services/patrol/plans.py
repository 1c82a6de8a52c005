"""Checking what an LLM proposed before anything is applied.

Every function returns the part of the plan that may be applied and the rejected items with
their reasons. Nothing an LLM says can name a node of another cluster or being, kill a pinned
node, or put one node in two groups.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engram.services.patrol.prompts import ConsolidateCluster, SplitCluster

MIN_SPLIT_GROUP = 2
MIN_REMAINING = 2


@dataclass
class Checked:
    merges: list[tuple[str, list[str]]] = field(default_factory=list)
    make_dead: list[str] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, item: Any, reason: str) -> None:
        self.rejected.append({"item": item, "reason": reason})


def check_consolidation(plan: ConsolidateCluster, nodes: Iterable[dict[str, Any]]) -> Checked:
    """`nodes`: the cluster's nodes that were shown to the model (status, pinned, id)."""
    by_id = {n["id"]: n for n in nodes}
    out = Checked()
    used: set[str] = set()
    for merge in plan.merges:
        item = merge.model_dump()
        ids = [merge.survivor, *merge.absorbed]
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            out.reject(item, f"unknown or foreign ids {unknown}")
            continue
        if not merge.absorbed:
            out.reject(item, "a merge absorbs at least one node")
            continue
        if len(set(ids)) != len(ids):
            out.reject(item, "a node appears twice in one merge (survivor also absorbed?)")
            continue
        if used & set(ids):
            out.reject(item, f"nodes {sorted(used & set(ids))} are already in another merge")
            continue
        if any(by_id[i]["status"] == "dead" for i in ids):
            out.reject(item, "dead nodes take no part in a merge")
            continue
        pinned = [i for i in merge.absorbed if by_id[i].get("pinned")]
        if pinned:
            out.reject(item, f"pinned nodes {pinned} are never absorbed")
            continue
        used |= set(ids)
        out.merges.append((merge.survivor, list(merge.absorbed)))
    for node_id in plan.make_dead:
        node = by_id.get(node_id)
        if node is None:
            out.reject(node_id, "unknown or foreign id in make_dead")
        elif node_id in used:
            out.reject(node_id, "node is part of a merge")
        elif node.get("pinned"):
            out.reject(node_id, "a pinned node is never made dead")
        elif node["status"] != "dying":
            out.reject(node_id, f"only dying nodes are made dead, this one is {node['status']}")
        elif node_id not in out.make_dead:
            out.make_dead.append(node_id)
    return out


def check_split(plan: SplitCluster, active_ids: Iterable[str]) -> Checked:
    members = list(active_ids)
    known = set(members)
    out = Checked()
    used: set[str] = set()
    for group in plan.groups:
        item = group.model_dump()
        ids = list(dict.fromkeys(group.node_ids))
        unknown = [i for i in ids if i not in known]
        if unknown:
            out.reject(item, f"unknown or foreign ids {unknown}")
            continue
        if used & set(ids):
            out.reject(item, f"nodes {sorted(used & set(ids))} are already in another group")
            continue
        if len(ids) < MIN_SPLIT_GROUP:
            out.reject(item, f"a group needs at least {MIN_SPLIT_GROUP} nodes")
            continue
        if len(known - used - set(ids)) < MIN_REMAINING:
            out.reject(item, f"at least {MIN_REMAINING} nodes must remain in the cluster")
            continue
        if not group.name.strip():
            out.reject(item, "a group needs a name")
            continue
        used |= set(ids)
        out.groups.append((group.name.strip(), ids))
    return out


def check_diary(diary: str, think_md: list[str]) -> str | None:
    """The reason the answer is unusable, or None."""
    lines = [ln for ln in diary.splitlines() if ln.strip()]
    if not 3 <= len(lines) <= 5:
        return f"the diary has {len(lines)} lines, not 3 to 5"
    notes = [n for n in think_md if n.strip()]
    if not 3 <= len(notes) <= 7:
        return f"think_md has {len(notes)} notes, not 3 to 7"
    return None
