"""The steps that need no LLM: ❶ notes → nodes (with repair and classification when an LLM is there),
sub-cluster birth, ❷ the cycle, ❸ flag dying, ❺ revive, ❼ small clusters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

from engram.domain.cluster import MAX_CLUSTER_NAME_CHARS, Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import DomainError, InvalidScene
from engram.domain.ids import node_id_for_note
from engram.domain.node import MemoryNode
from engram.domain.note import Note, Sensitivity
from engram.domain.patrol_run import PatrolStep
from engram.domain.scene import ParseFailure, SceneInput, validate_scene_object
from engram.projections.engine import fewer_gc_passes
from engram.projections.notes import utc_text
from engram.projections.sql import chunks
from engram.projections.vectors import VectorQueries
from engram.services.patrol.context import EPS, SAVE_BATCH, Skip, StepContext, log
from engram.services.patrol.grouping import (
    classify_root_fallback,
    cosine,
    fallback_cluster_name,
    mutual_group,
)
from engram.services.patrol.prompts import (
    ClassifyRoot,
    NameCluster,
    RepairScene,
    classify_root_prompt,
    name_cluster_prompt,
    repair_prompt,
)
from engram.services.patrol.proposed_text import Inputs, name_problem

MAX_BIRTH_CANDIDATES = 20
CHANGE_BATCH = 400  # nodes per load query and per save in ❸ and ❺ (one IN list, one transaction)


def _repair_failed_notes(ctx: StepContext) -> None:
    """One LLM repair attempt per failed scene note; the repaired scene is recorded on the note."""
    assert ctx.llm is not None
    run = ctx.run()
    failed = [
        n
        for n in ctx.read.notes(ctx.being_id, kinds=["scene"], parse_status="failed")
        if not n["repair_attempts"]
        and run.decision("repair_scene", n["id"]) is None
        and n["sensitivity"] != Sensitivity.SENSITIVE  # its text is never sent to an LLM (ADR 0046)
    ]
    for done, row in enumerate(failed):
        note = ctx.store.get(Note, UUID(row["id"]))
        asked = ctx.ask("repair_scene", repair_prompt(note.text, note.parse_error or ""), RepairScene, "fast")
        if asked.transient or asked.bad_response:
            # Not the note's fault: its one repair attempt is kept for a later patrol.
            log.warning("scene repair stopped: LLM unavailable", reason=asked.error)
            ctx.count("repair_deferred", len(failed) - done)
            if asked.bad_response:
                run = ctx.run()
                run.record_decision(
                    PatrolStep.NOTES_TO_NODES,
                    "repair_scene",
                    str(note.id),
                    at=ctx.clock.now(),
                    **asked.decision([]),
                )
                ctx.save(run)
            return
        rejected: list[dict[str, Any]] = []
        at = ctx.clock.now()
        if asked.plan is not None:
            data = asked.plan.model_dump(exclude_none=True)
            if not data.get("when"):  # the prompt allows no dates: the scene is dated by its note
                data["when"] = [note.created_on.date().isoformat()]
            try:
                scene = validate_scene_object(data)
                note.repair(scene, asked.model, at)
                ctx.count("repaired")
            except InvalidScene as exc:
                rejected.append({"item": asked.plan.model_dump(mode="json"), "reason": exc.message})
        if note.parse_status == "failed":
            note.reject_repair(asked.error or rejected[0]["reason"], asked.model, at)
            ctx.count("repair_rejected")
        run = ctx.run()
        run.record_decision(
            PatrolStep.NOTES_TO_NODES, "repair_scene", str(note.id), at=at, **asked.decision(rejected)
        )
        ctx.save(note, run)


def nearest_subcluster(
    vectors: VectorQueries, being_id: UUID, vector: Embedding, roots: Sequence[UUID], threshold: float
) -> tuple[str, float] | None:
    """Spec ❶.5: the sub-cluster whose centroid is the most similar to `vector`, at or above the
    cluster threshold, with its similarity; None sends the node to a root."""
    hits = vectors.similar_clusters(
        being_id, vector.model, StepContext.vec(vector.data), 1, exclude=roots, threshold=threshold - EPS
    )
    return (str(hits[0][0]), hits[0][1]) if hits else None


def notes_to_nodes(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❶."""
    if ctx.llm is not None:
        _repair_failed_notes(ctx)
    # A pending note superseded or expired meanwhile is no longer taken up (ADR 0049): it stays pending
    # in its history, and no read lists it as waiting.
    pending = ctx.read.notes(
        ctx.being_id, kinds=["scene"], parse_status="pending", active_at=utc_text(ctx.clock.now())
    )
    ctx.count("notes", len(pending))
    if not pending:
        return ctx.counts
    being = ctx.being()
    roots = {name: ctx.store.get(Cluster, cid) for name, cid in being.root_ids.items()}
    items: list[tuple[Note, SceneInput]] = []
    failures: list[Note] = []
    for row in pending:
        note = ctx.store.get(Note, UUID(row["id"]))
        try:
            parsed = note.scene_input()
        except InvalidScene as exc:  # older notes, written before intake validated objects
            parsed = ParseFailure(exc.message)
        if isinstance(parsed, ParseFailure):
            note.fail_parse(parsed.reason, ctx.clock.now())
            failures.append(note)
        else:
            items.append((note, parsed))
    if failures:
        ctx.save(*failures)
        ctx.count("parse_failed", len(failures))
    if not items:
        return ctx.counts
    ctx.advance(0, len(items))
    # Spec ❶.4: all new nodes' texts in one batched embedder call.
    vectors = ctx.embedder.embed([scene.scene.embed_text(scene.feeling) for _, scene in items])
    clusters: dict[str, Cluster] = {str(c.id): c for c in roots.values()}
    # A root is never matched (ADR 0042): its centroid averages unrelated memories and is near many new
    # ones, so a memory that fits no sub-cluster is classified as Business or Private instead.
    exclude = [c.id for c in roots.values()]
    llm_down = False  # after an outage (retries already spent by the adapter) the fallback classifies
    for part in chunks(list(zip(items, vectors, strict=True)), SAVE_BATCH):
        aggregates: list[Any] = []
        decisions: list[tuple[str, dict[str, Any]]] = []
        for (note, scene), vector in part:
            hit = nearest_subcluster(ctx.vectors, ctx.being_id, vector, exclude, ctx.thresholds.cluster)
            if hit is not None:
                cluster_id = hit[0]
                ctx.count("assigned_to_subcluster")
            else:
                root = classify_root_fallback(scene.scene.action, scene.themes)
                sensitive = note.sensitivity == Sensitivity.SENSITIVE  # never sent to an LLM (ADR 0046)
                if ctx.llm is not None and not llm_down and not sensitive:
                    asked = ctx.ask(
                        "classify_root", classify_root_prompt(scene.scene.action), ClassifyRoot, "fast"
                    )
                    llm_down = asked.transient or asked.bad_response
                    if isinstance(asked.plan, ClassifyRoot):
                        root = asked.plan.root
                        ctx.count("llm_classified")
                    decisions.append((str(note.id), asked.decision([])))
                cluster_id = str(roots[root].id)
                ctx.count("assigned_to_root")
            if cluster_id not in clusters:
                clusters[cluster_id] = ctx.store.get(Cluster, UUID(cluster_id))
            at = ctx.clock.now()
            node = MemoryNode.create(
                node_id_for_note(note.id),
                scene,
                clusters[cluster_id],
                being.cycle,
                at,
                source_note_id=note.id,
                source_ref=note.source_ref,
                expires_at=note.expires_at,
                sensitive=note.sensitivity == Sensitivity.SENSITIVE,
            )
            node.embed(vector, at)
            note.mark_processed(node.id, at)
            aggregates += [node, note]
        if decisions:
            run = ctx.run()
            for subject, decision in decisions:
                run.record_decision(
                    PatrolStep.NOTES_TO_NODES, "classify_root", subject, at=ctx.clock.now(), **decision
                )
            aggregates.append(run)
        ctx.save(*aggregates)
        ctx.count("nodes_created", len(part))
        ctx.advance(ctx.counts["nodes_created"], len(items))
    return ctx.counts


def _created_since(ctx: StepContext, since: str) -> list[dict[str, Any]]:
    """The being's nodes created at or after `since`, oldest first, in O(new), not O(all nodes).

    No view index serves `created_at`; a node's last activation is its creation or a later read, so
    the nodes created since `since` are among those activated since, which the (being, last
    activation) index lists newest first.
    """
    limit = 256
    while True:
        rows = ctx.read.nodes(ctx.being_id, order="recent", limit=limit)
        if len(rows) < limit or rows[-1]["last_activated_at"] < since:
            break
        limit *= 4
    return sorted((r for r in rows if r["created_at"] >= since), key=lambda r: (r["created_at"], r["id"]))


def birth_subclusters(ctx: StepContext) -> dict[str, int] | Skip:
    """ADR 0007: ≥ 3 mutually similar active nodes directly under a root become a sub-cluster.

    Only nodes new in this patrol seed a search, so the step costs what changed, not the root's size.
    """
    since = ctx.run().created_on.isoformat()
    being = ctx.being()
    new = _created_since(ctx, since)
    for root_id in being.root_ids.values():
        seeds = [n for n in new if n["cluster_id"] == str(root_id) and n["status"] == "active"]
        taken: set[str] = set()
        for seed in seeds:
            if seed["id"] in taken or seed["embedding_model"] is None:
                continue
            seed_vec = ctx.read.node_vectors(ctx.being_id, [seed["id"]]).get(seed["id"])
            if seed_vec is None:
                continue
            hits = ctx.vectors.similar_nodes(
                ctx.being_id,
                seed["embedding_model"],
                seed_vec,
                MAX_BIRTH_CANDIDATES,
                statuses=["active"],
                cluster_ids=[str(root_id)],
                exclude=[UUID(seed["id"])],
                threshold=ctx.thresholds.cluster - EPS,
            )
            candidates = [str(h) for h, _ in hits if str(h) not in taken]
            vectors = ctx.read.node_vectors(ctx.being_id, [seed["id"], *candidates])
            group = mutual_group(seed["id"], candidates, vectors, ctx.thresholds.cluster)
            if len(group) < 3:
                continue
            rows = ctx.read.nodes(ctx.being_id, ids=[UUID(g) for g in group])
            name, decision = fallback_cluster_name(rows), None
            shown = [r for r in rows if not r["sensitive"]]  # never sent to an LLM (ADR 0046)
            if ctx.llm is not None and shown:
                asked = ctx.ask("name_cluster", name_cluster_prompt(shown), NameCluster, "fast")
                rejected: list[dict[str, Any]] = []
                if isinstance(asked.plan, NameCluster):
                    # An overlong name is cut, as it always was; every other flaw falls back (ADR 0027).
                    proposed = asked.plan.name.strip()[:MAX_CLUSTER_NAME_CHARS]
                    problem = name_problem(proposed, Inputs.of(shown))
                    if problem is None:
                        name = proposed
                    else:
                        rejected.append({"item": proposed, "reason": problem})
                decision = asked.decision(rejected)
            at = ctx.clock.now()
            cluster = Cluster.create_sub(ctx.ids.new_id(), ctx.store.get(Cluster, root_id), name, at)
            nodes = [ctx.store.get(MemoryNode, UUID(g), being_id=ctx.being_id) for g in group]
            for node in nodes:
                node.move_to(cluster, at)
            aggregates: list[Any] = [cluster, *nodes]
            if decision is not None:
                run = ctx.run()
                run.record_decision(
                    PatrolStep.BIRTH_SUBCLUSTERS, "name_cluster", str(cluster.id), at=at, **decision
                )
                aggregates.append(run)
            ctx.save(*aggregates)
            taken |= set(group)
            ctx.count("subclusters_born")
            ctx.count("nodes_moved", len(group))
    return ctx.counts


def flag_dying(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❸, through the read model's (status, pinned, dying_cycle) index."""
    cycle = ctx.being().cycle
    candidates = ctx.read.dying_candidates(ctx.being_id, cycle)
    flagged = _change_nodes(
        ctx, candidates, lambda node: node.flag_dying(cycle, ctx.clock.now()), "not flagged"
    )
    ctx.count("flagged_dying", flagged)
    return ctx.counts


def revive(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❺: dead nodes read since they died whose effective importance is above 0.05 again."""
    cycle = ctx.being().cycle
    candidates = ctx.read.revivable(ctx.being_id)
    revived = _change_nodes(ctx, candidates, lambda node: node.revive(cycle, ctx.clock.now()), "not revived")
    ctx.count("revived", revived)
    return ctx.counts


def _change_nodes(
    ctx: StepContext, rows: Sequence[Mapping[str, Any]], change: Callable[[MemoryNode], None], refused: str
) -> int:
    """Apply `change` to the nodes of `rows`: loaded in bulk, saved in batches, the views caught up once.

    The cost follows the number of nodes that change, with a small constant per node: one query loads a
    few hundred nodes, one transaction saves them, and the views apply all the step's events together.
    A crash between batches is harmless: the saved nodes left the view's candidates, so a resumed step
    finds only the others. The garbage collector runs less often meanwhile (`fewer_gc_passes`).
    """
    changed = 0
    position: int | None = None
    with fewer_gc_passes():
        for part in chunks(rows, CHANGE_BATCH):
            nodes = ctx.store.get_many(MemoryNode, [UUID(r["id"]) for r in part], being_id=ctx.being_id)
            kept = []
            for node in nodes:
                try:
                    change(node)
                except DomainError as exc:  # the view lagged a concurrent change; the aggregate decides
                    log.info(refused, node_id=str(node.id), reason=exc.message)
                    continue
                kept.append(node)
            position = ctx.store.save(*kept) or position
            changed += len(kept)
        if position is not None:
            ctx.views.ensure(position)
    return changed


def merge_small_clusters(ctx: StepContext) -> dict[str, int] | Skip:
    """Spec ❼, mechanically: every sub-cluster with ≤ 2 active nodes. An empty one (no node, dead ones
    included) is deleted; the others' nodes, dead ones included, join the sibling sub-cluster (same
    parent) whose centroid is the most similar of all siblings, if above the cluster threshold, else
    the parent; the emptied cluster is deleted unless it has child clusters."""
    clusters = ctx.read.clusters(ctx.being_id)
    gone: set[str] = set()
    for small in [c for c in clusters if not c["is_root"] and c["active_count"] <= 2]:
        if small["id"] in gone:
            continue
        has_children = any(c["parent_id"] == small["id"] and c["id"] not in gone for c in clusters)
        at = ctx.clock.now()
        source = ctx.store.get(Cluster, UUID(small["id"]))
        if small["total_count"] == 0:
            if not has_children:
                source.delete("empty", at)
                ctx.save(source)
                gone.add(small["id"])
                ctx.count("deleted_empty")
            continue
        siblings = [
            c["id"]
            for c in clusters
            if c["parent_id"] == small["parent_id"]
            and not c["is_root"]
            and c["id"] not in gone
            and c["id"] != small["id"]
        ]
        target_id = _most_similar_sibling(ctx, small["id"], siblings) or small["parent_id"]
        target = ctx.store.get(Cluster, UUID(target_id))
        members = ctx.read.nodes(ctx.being_id, cluster_id=UUID(small["id"]))  # every status
        aggregates: list[Any] = []
        for row in members:
            node = ctx.store.get(MemoryNode, UUID(row["id"]), being_id=ctx.being_id)
            node.move_to(target, at)
            aggregates.append(node)
        if not has_children:
            source.delete(f"merged into {target_id}", at)
            aggregates.append(source)
            gone.add(small["id"])
        ctx.save(*aggregates)
        ctx.count("merged_into_sibling" if target_id != small["parent_id"] else "merged_into_root")
        ctx.count("nodes_moved", len(members))
    return ctx.counts


def _most_similar_sibling(ctx: StepContext, cluster_id: str, siblings: Sequence[str]) -> str | None:
    """The sibling whose centroid is the most similar to the cluster's, if above the cluster threshold.

    Every sibling is compared (one read of their centroids), not the nearest few clusters of the whole
    being, where other roots' sub-clusters could crowd a sibling out. A cluster without a centroid (no
    active embedded node) has no similarity to anything: its nodes go to the parent."""
    ids = [UUID(cluster_id), *(UUID(s) for s in siblings)]
    centroids = ctx.vectors.centroids(ctx.being_id, ctx.model, ids)
    own = centroids.pop(UUID(cluster_id), None)
    if own is None or not centroids:
        return None
    score, best = max((cosine(own, vec), str(sid)) for sid, vec in centroids.items())
    return best if score > ctx.thresholds.cluster else None
