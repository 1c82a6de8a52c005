"""Checking what an LLM proposed before anything is applied.

Every function returns the part of the plan that may be applied and the rejected items with
their reasons. Nothing an LLM says can name a node of another cluster or being, kill a pinned
node, put one node in two groups, merge memories that are not alike (ADR 0027), or store a name or
text that carries an instruction (`proposed_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.services.patrol.grouping import Vec, cosine
from engram.services.patrol.prompts import ConsolidateCluster, SplitCluster
from engram.services.patrol.proposed_text import Inputs, name_problem, text_problem

MIN_SPLIT_GROUP = 2
MIN_REMAINING = 2


@dataclass
class Checked:
    merges: list[tuple[str, list[str]]] = field(default_factory=list)
    make_dead: list[str] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, item: Any, reason: str, **details: Any) -> None:
        self.rejected.append({"item": item, "reason": reason, **details})


def check_consolidation(
    plan: ConsolidateCluster, nodes: Iterable[dict[str, Any]], vectors: Mapping[str, Vec], floor: float
) -> Checked:
    """`nodes`: the cluster's nodes that were shown to the model (status, pinned, id, embedding_model);
    `vectors`: theirs, from the vectors view; `floor`: the embedder's merge floor."""
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
        pairs = _similarities(merge.survivor, merge.absorbed, by_id, vectors)
        unlike = [p for p in pairs if p["similarity"] is None or p["similarity"] < floor]
        if unlike:
            lowest = min((p["similarity"] for p in unlike if p["similarity"] is not None), default=None)
            out.reject(
                item,
                f"the memories are not alike enough to merge: similarity {lowest:.2f} to the survivor, "
                f"below the floor of {floor:.2f}"
                if lowest is not None
                else "a memory to merge has no vector comparable with the survivor's",
                floor=floor,
                similarities=pairs,
            )
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


def _similarities(
    survivor: str, absorbed: list[str], nodes: Mapping[str, dict[str, Any]], vectors: Mapping[str, Vec]
) -> list[dict[str, Any]]:
    """Each absorbed node's cosine to the survivor; None where the two have no vectors of one model."""
    pairs = []
    a = vectors.get(survivor)
    for node_id in absorbed:
        b = vectors.get(node_id)
        similarity = None
        same_model = nodes[survivor].get("embedding_model") == nodes[node_id].get("embedding_model")
        if a is not None and b is not None and a.shape == b.shape and same_model:
            similarity = round(cosine(a, b), 4)
        pairs.append({"survivor": survivor, "absorbed": node_id, "similarity": similarity})
    return pairs


def check_split(plan: SplitCluster, active: Iterable[dict[str, Any]], staying_elsewhere: int = 0) -> Checked:
    """`active`: the cluster's active nodes (id, action, feeling) shown to the model; `staying_elsewhere`:
    its active nodes not shown (a large cluster asked in parts), which stay unless another part moves them."""
    rows = list(active)
    members = [n["id"] for n in rows]
    known = set(members)
    inputs = Inputs.of(rows)
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
        if len(known - used - set(ids)) + staying_elsewhere < MIN_REMAINING:
            out.reject(item, f"at least {MIN_REMAINING} nodes must remain in the cluster")
            continue
        problem = name_problem(group.name, inputs)
        if problem is not None:
            out.reject(item, problem)
            continue
        used |= set(ids)
        out.groups.append((group.name.strip(), ids))
    return out


def check_diary(diary: str, think_md: list[str], scenes: Iterable[dict[str, Any]]) -> str | None:
    """The reason the answer is unusable, or None. `scenes`: the new memories the prompt showed."""
    lines = [ln for ln in diary.splitlines() if ln.strip()]
    if not 3 <= len(lines) <= 5:
        return f"the diary has {len(lines)} lines, not 3 to 5"
    notes = [n for n in think_md if n.strip()]
    if not 3 <= len(notes) <= 7:
        return f"think_md has {len(notes)} notes, not 3 to 7"
    inputs = Inputs.of(scenes)
    problem = text_problem(diary, inputs, what="the diary", line_breaks=True)
    for note in notes:
        problem = problem or text_problem(note, inputs, what="a think_md note")
    return problem
