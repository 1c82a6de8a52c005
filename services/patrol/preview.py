"""What a dry run shows of ❶: the node each pending scene note would become, and its cluster.

Nothing is written and no LLM is asked; the notes' texts are embedded (one batched call, as ❶ does)
because a node's cluster follows from its vector. Where a real patrol would ask the LLM to choose
the root, the preview shows the keyword fallback's choice and says that the LLM decides.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.domain.being import Being
from engram.domain.errors import InvalidScene
from engram.domain.note import Note, Sensitivity
from engram.domain.scene import ParseFailure, SceneInput
from engram.services.patrol.grouping import classify_root_fallback
from engram.services.patrol.mechanical import nearest_subcluster
from engram.services.ports import Embedder
from engram.services.store import AggregateStore
from engram.services.thresholds import thresholds_for
from engram.services.views import Views


def would_be_born(
    store: AggregateStore,
    views: Views,
    embedder: Embedder,
    being: Being,
    *,
    llm_decides_roots: bool,
    active_at: str | None = None,
) -> list[dict[str, Any]]:
    """One entry per pending scene note that parses, in note order: the note, the node's action, the
    cluster it would join (id and name) and how it was chosen (`similarity` with its score, or
    `keywords` for a root, with `llm_decides` when a real patrol would ask the LLM instead)."""
    pending = views.read.notes(being.id, kinds=["scene"], parse_status="pending", active_at=active_at)
    notes = store.get_many(Note, [UUID(r["id"]) for r in pending], being_id=being.id)
    scenes: list[tuple[Note, SceneInput]] = []
    for note in notes:
        try:
            parsed = note.scene_input()
        except InvalidScene:  # older notes, written before intake validated objects: they would fail
            continue
        if not isinstance(parsed, ParseFailure):
            scenes.append((note, parsed))
    if not scenes:
        return []
    vectors = embedder.embed([s.scene.embed_text(s.feeling) for _, s in scenes])
    names = {c["id"]: c["name"] for c in views.read.clusters(being.id)}
    roots = dict(being.root_ids)
    threshold = thresholds_for(embedder.model_id).cluster
    born = []
    for (note, scene), vector in zip(scenes, vectors, strict=True):
        entry: dict[str, Any] = {"note_id": str(note.id), "action": scene.scene.action}
        hit = nearest_subcluster(views.vectors, being.id, vector, list(roots.values()), threshold)
        if hit is not None:
            cluster_id, score = hit
            entry |= {"cluster_id": cluster_id, "cluster": names.get(cluster_id), "placed_by": "similarity"}
            entry["similarity"] = round(score, 4)
        else:
            root = classify_root_fallback(scene.scene.action, scene.themes)
            entry |= {"cluster_id": str(roots[root]), "cluster": root, "placed_by": "keywords"}
            # A sensitive note's scene is never sent to an LLM: the keywords decide (ADR 0046).
            entry["llm_decides"] = llm_decides_roots and note.sensitivity != Sensitivity.SENSITIVE
        born.append(entry)
    return born
