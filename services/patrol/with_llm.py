"""The steps that need an LLM: ❹ consolidation, ❻ split, diary and think_md.

Each cluster's decision is recorded on the PatrolRun in the same transaction as its effects, so a
recorded decision means an applied one: a resumed patrol skips it and never asks twice.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.domain.cluster import Cluster
from engram.domain.errors import DomainError
from engram.domain.node import MemoryNode
from engram.domain.patrol_run import PatrolStep
from engram.services.patrol.asking import Asked
from engram.services.patrol.context import Skip, StepContext
from engram.services.patrol.plans import check_consolidation, check_diary, check_split
from engram.services.patrol.prompts import (
    ConsolidateCluster,
    SplitCluster,
    WriteDiary,
    consolidate_prompt,
    diary_prompt,
    split_prompt,
)

MAX_NODES_IN_PROMPT = 150
SPLIT_ABOVE = 10
MAX_SCENES_IN_DIARY_PROMPT = 100
MAX_NOTE_CHARS_IN_DIARY_PROMPT = 2000
NO_SCENE_NOTES = "no scene notes this cycle"


def _record(
    ctx: StepContext, step: PatrolStep, task: str, subject: str, asked: Asked, rejected: list[dict[str, Any]]
) -> Any:
    run = ctx.run()
    run.record_decision(step, task, subject, at=ctx.clock.now(), **asked.decision(rejected))
    return run


def consolidate(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❹, per cluster holding fresh or dying nodes."""
    assert ctx.llm is not None
    touched = ctx.read.nodes(ctx.being_id, statuses=["active", "dying"], fresh=True)
    touched += ctx.read.nodes(ctx.being_id, statuses=["dying"])
    cluster_ids = sorted({n["cluster_id"] for n in touched})
    for cluster_id in cluster_ids:
        if ctx.run().decision("consolidate_cluster", cluster_id) is not None:
            continue  # decided and applied before a crash
        cluster = ctx.read.cluster(ctx.being_id, UUID(cluster_id))
        if cluster is None:
            continue
        members = ctx.read.nodes(
            ctx.being_id, statuses=["active", "dying"], cluster_id=UUID(cluster_id), order="recent"
        )
        # The fresh and dying nodes are the point of the question; the rest is context, bounded.
        shown = [n for n in members if n["fresh"] or n["status"] == "dying"]
        shown += [n for n in members if not (n["fresh"] or n["status"] == "dying")]
        shown = shown[:MAX_NODES_IN_PROMPT]
        asked = ctx.ask(
            "consolidate_cluster", consolidate_prompt(cluster["name"], shown), ConsolidateCluster, "reasoning"
        )
        if asked.transient:
            return Skip(f"{asked.error} (after {ctx.counts.get('clusters', 0)} clusters)")
        ctx.count("clusters")
        if not isinstance(asked.plan, ConsolidateCluster):
            ctx.save(_record(ctx, PatrolStep.CONSOLIDATE, "consolidate_cluster", cluster_id, asked, []))
            ctx.count("clusters_skipped")
            if asked.bad_response:
                return Skip(f"{asked.error} (after {ctx.counts['clusters']} clusters)")
            continue
        named = {i for m in asked.plan.merges for i in (m.survivor, *m.absorbed)} & {n["id"] for n in shown}
        vectors = ctx.read.node_vectors(ctx.being_id, sorted(named))
        checked = check_consolidation(asked.plan, shown, vectors, ctx.thresholds.merge)
        at = ctx.clock.now()
        cycle = ctx.being().cycle
        loaded: dict[str, MemoryNode] = {}

        def node(node_id: str, loaded: dict[str, MemoryNode] = loaded) -> MemoryNode:
            if node_id not in loaded:
                loaded[node_id] = ctx.store.get(MemoryNode, UUID(node_id), being_id=ctx.being_id)
            return loaded[node_id]

        merged: set[str] = set()
        for survivor, absorbed in checked.merges:
            try:
                node(survivor).absorb([node(a) for a in absorbed], cycle, at)
            except DomainError as exc:
                checked.reject({"survivor": survivor, "absorbed": absorbed}, exc.message)
                continue
            merged |= {survivor, *absorbed}
            ctx.count("merged", len(absorbed))
        for node_id in checked.make_dead:
            try:
                node(node_id).make_dead(cycle, "consolidation: dying without a merge partner", at)
                ctx.count("made_dead")
            except DomainError as exc:
                checked.reject(node_id, exc.message)
        for n in shown:
            if n["fresh"] and n["id"] not in merged:
                node(n["id"]).clear_fresh(at)
                ctx.count("unfreshed")
        ctx.count("rejected", len(checked.rejected))
        run = _record(ctx, PatrolStep.CONSOLIDATE, "consolidate_cluster", cluster_id, asked, checked.rejected)
        ctx.save(*loaded.values(), run)
    ctx.count("clusters", 0)
    return ctx.counts


def split(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❻: sub-clusters with more than 10 active nodes; roots are never split."""
    assert ctx.llm is not None
    large = [
        c for c in ctx.read.clusters(ctx.being_id) if not c["is_root"] and c["active_count"] > SPLIT_ABOVE
    ]
    for cluster in large:
        if ctx.run().decision("split_cluster", cluster["id"]) is not None:
            continue
        members = ctx.read.nodes(
            ctx.being_id, statuses=["active"], cluster_id=UUID(cluster["id"]), order="recent"
        )
        shown = members[:MAX_NODES_IN_PROMPT]
        asked = ctx.ask("split_cluster", split_prompt(cluster["name"], shown), SplitCluster, "reasoning")
        if asked.transient:
            return Skip(f"{asked.error} (after {ctx.counts.get('clusters', 0)} clusters)")
        ctx.count("clusters")
        if not isinstance(asked.plan, SplitCluster):
            ctx.save(_record(ctx, PatrolStep.SPLIT, "split_cluster", cluster["id"], asked, []))
            ctx.count("clusters_skipped")
            if asked.bad_response:
                return Skip(f"{asked.error} (after {ctx.counts['clusters']} clusters)")
            continue
        checked = check_split(asked.plan, members)
        at = ctx.clock.now()
        source = ctx.store.get(Cluster, UUID(cluster["id"]))
        aggregates: list[Any] = []
        for name, ids in checked.groups:
            try:
                new = Cluster.split_off(ctx.ids.new_id(), source, name, at)
                nodes = [ctx.store.get(MemoryNode, UUID(i), being_id=ctx.being_id) for i in ids]
                for n in nodes:
                    n.move_to(new, at)
            except DomainError as exc:
                checked.reject({"name": name, "node_ids": ids}, exc.message)
                continue
            aggregates += [new, *nodes]
            ctx.count("new_clusters")
            ctx.count("nodes_moved", len(ids))
        ctx.count("rejected", len(checked.rejected))
        ctx.save(
            *aggregates,
            _record(ctx, PatrolStep.SPLIT, "split_cluster", cluster["id"], asked, checked.rejected),
        )
    ctx.count("clusters", 0)
    return ctx.counts


def scene_notes_taken_up(ctx: StepContext) -> list[dict[str, Any]]:
    """The scene notes this cycle's ❶ took up (ADR 0040), as the diary shows them: the nodes it made of
    them (whatever became of those since), then the notes that stayed unparsed, by their text.

    A failed note whose one repair attempt was spent in an earlier cycle is not taken up again: it
    would otherwise bring a diary, and an LLM call, to every patrol while it lies there.
    """
    run = ctx.run()
    nodes = ctx.read.nodes(ctx.being_id, created_since=run.created_on.isoformat())
    failed = [
        {"action": n["text"][:MAX_NOTE_CHARS_IN_DIARY_PROMPT], "feeling": ""}
        for n in ctx.read.notes(ctx.being_id, kinds=["scene"], parse_status="failed")
        if not n["repair_attempts"] or run.decision("repair_scene", n["id"]) is not None
    ]
    return [*nodes, *failed]


def diary(ctx: StepContext) -> dict[str, int] | Skip:
    """After ❼, when this cycle took up any scene notes: a 3-5 line diary entry for the patrol's date
    and 3-7 notes as `think_md`."""
    assert ctx.llm is not None
    run = ctx.run()
    subject = run.created_on.date().isoformat()
    if run.decision("write_diary", subject) is not None:
        return ctx.counts
    scenes = scene_notes_taken_up(ctx)
    if not scenes:
        return Skip(NO_SCENE_NOTES)
    being = ctx.being()
    shown = scenes[:MAX_SCENES_IN_DIARY_PROMPT]
    prompt = diary_prompt(being.soul, subject, shown)
    problem: str | None = None
    for _ in (1, 2):
        asked = ctx.ask("write_diary", prompt, WriteDiary, "reasoning")
        if asked.transient:
            return Skip(asked.error or "LLM unavailable")
        if asked.bad_response:
            ctx.save(_record(ctx, PatrolStep.DIARY, "write_diary", subject, asked, []))
            return Skip(f"no usable diary: {asked.error}")
        if not isinstance(asked.plan, WriteDiary):
            problem = asked.error
            continue
        problem = check_diary(asked.plan.diary, asked.plan.think_md, shown)
        if problem is None:
            break
    if problem is not None or not isinstance(asked.plan, WriteDiary):
        ctx.save(
            _record(ctx, PatrolStep.DIARY, "write_diary", subject, asked, [{"item": None, "reason": problem}])
        )
        return Skip(f"no usable diary: {problem}")
    at = ctx.clock.now()
    try:
        being.write_diary(
            subject, "\n".join(ln.strip() for ln in asked.plan.diary.splitlines() if ln.strip()), at
        )
        being.write_think_md(
            "\n".join(f"- {n.strip().lstrip('-• ').strip()}" for n in asked.plan.think_md if n.strip()), at
        )
    except DomainError as exc:  # e.g. longer than the being accepts: refused, never a crashed patrol
        ctx.save(
            _record(
                ctx, PatrolStep.DIARY, "write_diary", subject, asked, [{"item": None, "reason": exc.message}]
            )
        )
        return Skip(f"no usable diary: {exc.message}")
    ctx.save(being, _record(ctx, PatrolStep.DIARY, "write_diary", subject, asked, []))
    ctx.count("diary_written")
    return ctx.counts
