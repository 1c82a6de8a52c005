"""The steps that need an LLM: ❹ consolidation, ❻ split, diary and think_md.

Each cluster's decision is recorded on the PatrolRun in the same transaction as its effects, so a
recorded decision means an applied one: a resumed patrol skips it and never asks twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from engram.domain.cluster import Cluster
from engram.domain.errors import DomainError
from engram.domain.node import MemoryNode
from engram.domain.note import Sensitivity
from engram.domain.patrol_run import PatrolStep
from engram.services.patrol.asking import Asked
from engram.services.patrol.context import Skip, StepContext
from engram.services.patrol.grouping import Part, similarity_parts
from engram.services.patrol.plans import MIN_SPLIT_GROUP, check_consolidation, check_diary, check_split
from engram.services.patrol.prompts import (
    ConsolidateCluster,
    SplitCluster,
    WriteDiary,
    consolidate_prompt,
    diary_prompt,
    split_prompt,
)

MAX_NODES_IN_PROMPT = 150
"""The most nodes one ❹ or ❻ prompt shows; a larger cluster is asked in parts (ADR 0041)."""
PART_OVERLAP = 20
"""The nodes each part of a large cluster borrows from the others, the most like its own."""
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


def _no_plan(ctx: StepContext, step: PatrolStep, task: str, subject: str, asked: Asked) -> Skip | None:
    """A cluster's answer held no plan: recorded and the cluster skipped; a bad response (the LLM server
    misbehaving, not this cluster) skips the rest of the step."""
    ctx.save(_record(ctx, step, task, subject, asked, []))
    ctx.count("clusters_skipped")
    if asked.bad_response:
        return Skip(f"{asked.error} (after {ctx.counts['clusters']} clusters)")
    return None


def _counted(ctx: StepContext, asked: Asked, *, first: bool, in_parts: bool) -> Skip | None:
    """After ❹ or ❻ asked about a cluster or one of its parts: a transient error ends the step (the next
    patrol asks again); else the cluster is counted once, at its first call, and each part asked."""
    if asked.transient:
        return Skip(f"{asked.error} (after {ctx.counts.get('clusters', 0)} clusters)")
    if first:
        ctx.count("clusters")
    if in_parts:
        ctx.count("parts")
    return None


def _focus(row: dict[str, Any]) -> bool:
    """A node ❹ is about: fresh or dying. The others are shown as context, as merge partners."""
    return bool(row["fresh"]) or row["status"] == "dying"


def _holding(ids: set[str]) -> Callable[[Sequence[str]], bool]:
    """Whether a part's own nodes include any of `ids`."""
    return lambda own: not ids.isdisjoint(own)


def _parts(
    ctx: StepContext, rows: list[dict[str, Any]], wanted: Callable[[Sequence[str]], bool] | None = None
) -> list[Part]:
    """A cluster's nodes in the parts asked one call each: one part up to `MAX_NODES_IN_PROMPT` nodes,
    else parts of alike nodes overlapping by `PART_OVERLAP` (ADR 0041); `wanted` as in
    `similarity_parts`."""
    ids = [r["id"] for r in rows]
    if len(ids) <= MAX_NODES_IN_PROMPT:
        return [Part(ids, [])]
    # Planned in id order, not in the order of the prompt (which flags change): a patrol resumed after
    # a part plans the same parts again, unless the decided parts merged nodes away.
    ids.sort()
    vectors = ctx.read.node_vectors(ctx.being_id, ids)
    return similarity_parts(ids, vectors, MAX_NODES_IN_PROMPT, PART_OVERLAP, wanted=wanted)


def _subjects(ctx: StepContext, task: str, cluster_id: str, parts: list[Part]) -> list[str]:
    """The decisions' subjects: the cluster, or the cluster and the part when it is asked in parts,
    also when a patrol resumed after its first part finds the cluster small enough for one."""
    in_parts = len(parts) > 1 or ctx.run().decision(task, f"{cluster_id}/part-1") is not None
    return [f"{cluster_id}/part-{k}" if in_parts else cluster_id for k in range(1, len(parts) + 1)]


def _current(
    ctx: StepContext, cluster_id: str, ids: list[str], statuses: tuple[str, ...]
) -> list[dict[str, Any]]:
    """`ids`' rows as they are now, in that order, those still in the cluster with one of `statuses`:
    an earlier part may have merged, killed or moved some of a later part's nodes."""
    rows = {
        r["id"]: r
        for r in ctx.read.nodes(ctx.being_id, ids=[UUID(i) for i in ids])
        if r["cluster_id"] == cluster_id and r["status"] in statuses and not r["sensitive"]
    }
    return [rows[i] for i in ids if i in rows]


def consolidate(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❹, per cluster holding fresh or dying nodes; a large cluster in parts (ADR 0041)."""
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
        members = [n for n in members if not n["sensitive"]]  # never shown to an LLM (ADR 0046)
        # The fresh and dying nodes are the point of the question: they lead, the rest is context.
        members = [n for n in members if _focus(n)] + [n for n in members if not _focus(n)]
        parts = _parts(ctx, members, wanted=_holding({n["id"] for n in members if _focus(n)}))
        asked_any = False
        subjects = _subjects(ctx, "consolidate_cluster", cluster_id, parts)
        for k, (part, subject) in enumerate(zip(parts, subjects, strict=True), 1):
            if ctx.run().decision("consolidate_cluster", subject) is not None:
                continue  # this part was decided and applied before a crash
            shown = _current(ctx, cluster_id, part.shown, ("active", "dying"))
            own = set(part.own)
            if len(parts) > 1:
                shown.sort(key=lambda n: not _focus(n))
                if not any(_focus(n) for n in shown if n["id"] in own):
                    continue  # its own nodes were all decided by earlier patrols (ADR 0041)
            label = (k, len(parts)) if len(parts) > 1 else None
            asked = ctx.ask(
                "consolidate_cluster",
                consolidate_prompt(cluster["name"], shown, label),
                ConsolidateCluster,
                "reasoning",
            )
            stop = _counted(ctx, asked, first=not asked_any, in_parts=label is not None)
            if stop is not None:
                return stop
            asked_any = True
            outcome = _apply_consolidation(ctx, subject, asked, shown, own)
            if outcome is not None:
                return outcome
    ctx.count("clusters", 0)
    return ctx.counts


def _apply_consolidation(
    ctx: StepContext, subject: str, asked: Asked, shown: list[dict[str, Any]], own: set[str]
) -> Skip | None:
    """Check one answer of ❹ and apply what passes, recorded with its effects in one transaction."""
    if not isinstance(asked.plan, ConsolidateCluster):
        return _no_plan(ctx, PatrolStep.CONSOLIDATE, "consolidate_cluster", subject, asked)
    named = {i for m in asked.plan.merges for i in (m.survivor, *m.absorbed)} & {n["id"] for n in shown}
    vectors = ctx.read.node_vectors(ctx.being_id, sorted(named))
    checked = check_consolidation(asked.plan, shown, vectors, ctx.thresholds.merge)
    at = ctx.clock.now()
    cycle = ctx.being().cycle
    loaded: dict[str, MemoryNode] = {}

    def node(node_id: str) -> MemoryNode:
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
        # A borrowed node keeps its fresh flag: the part that owns it decides about it.
        if n["fresh"] and n["id"] in own and n["id"] not in merged:
            node(n["id"]).clear_fresh(at)
            ctx.count("unfreshed")
    ctx.count("rejected", len(checked.rejected))
    run = _record(ctx, PatrolStep.CONSOLIDATE, "consolidate_cluster", subject, asked, checked.rejected)
    ctx.save(*loaded.values(), run)
    return None


def split(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❻: sub-clusters with more than 10 active nodes; roots are never split. A large cluster is
    asked in parts (ADR 0041); at least 2 nodes stay in it whatever the parts propose."""
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
        members = [n for n in members if not n["sensitive"]]  # never shown to an LLM (ADR 0046)
        parts = _parts(ctx, members)
        asked_any = False
        subjects = _subjects(ctx, "split_cluster", cluster["id"], parts)
        for k, (part, subject) in enumerate(zip(parts, subjects, strict=True), 1):
            if ctx.run().decision("split_cluster", subject) is not None:
                continue
            shown = _current(ctx, cluster["id"], part.shown, ("active",))
            now = ctx.read.cluster(ctx.being_id, UUID(cluster["id"]))
            if now is None or len(shown) < MIN_SPLIT_GROUP:
                continue  # earlier parts moved this part's nodes away: no group is left to form
            label = (k, len(parts)) if len(parts) > 1 else None
            asked = ctx.ask(
                "split_cluster", split_prompt(cluster["name"], shown, label), SplitCluster, "reasoning"
            )
            stop = _counted(ctx, asked, first=not asked_any, in_parts=label is not None)
            if stop is not None:
                return stop
            asked_any = True
            outcome = _apply_split(
                ctx, cluster["id"], subject, asked, shown, now["active_count"] - len(shown)
            )
            if outcome is not None:
                return outcome
    ctx.count("clusters", 0)
    return ctx.counts


def _apply_split(
    ctx: StepContext,
    cluster_id: str,
    subject: str,
    asked: Asked,
    shown: list[dict[str, Any]],
    staying_elsewhere: int,
) -> Skip | None:
    """Check one answer of ❻ and apply what passes, recorded with its effects in one transaction."""
    if not isinstance(asked.plan, SplitCluster):
        return _no_plan(ctx, PatrolStep.SPLIT, "split_cluster", subject, asked)
    checked = check_split(asked.plan, shown, staying_elsewhere)
    at = ctx.clock.now()
    source = ctx.store.get(Cluster, UUID(cluster_id))
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
    ctx.save(*aggregates, _record(ctx, PatrolStep.SPLIT, "split_cluster", subject, asked, checked.rejected))
    return None


def scene_notes_taken_up(ctx: StepContext) -> list[dict[str, Any]]:
    """The scene notes this cycle's ❶ took up (ADR 0040), as the diary shows them: the nodes it made of
    them (whatever became of those since), then the notes that stayed unparsed, by their text.

    A failed note whose one repair attempt was spent in an earlier cycle is not taken up again: it
    would otherwise bring a diary, and an LLM call, to every patrol while it lies there.
    """
    run = ctx.run()
    # Sensitive memories and notes are never sent to an LLM (ADR 0046): the diary is written without them.
    nodes = [
        n
        for n in ctx.read.nodes(ctx.being_id, created_since=run.created_on.isoformat())
        if not n["sensitive"]
    ]
    failed = [
        {"action": n["text"][:MAX_NOTE_CHARS_IN_DIARY_PROMPT], "feeling": ""}
        for n in ctx.read.notes(ctx.being_id, kinds=["scene"], parse_status="failed")
        if (not n["repair_attempts"] or run.decision("repair_scene", n["id"]) is not None)
        and n["sensitivity"] != Sensitivity.SENSITIVE
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
