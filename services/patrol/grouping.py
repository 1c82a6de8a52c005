"""Deterministic helpers of patrol: mutual-similarity groups, fallback names and root classification."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Vec = npt.NDArray[np.float32]


def cosine(a: Vec, b: Vec) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0 or nb == 0 else float(np.dot(a, b) / (na * nb))


def mutual_group(
    seed: str, candidates: Sequence[str], vectors: Mapping[str, Vec], threshold: float
) -> list[str]:
    """The seed plus, in the given order, every candidate similar ≥ threshold to all members so far."""
    group = [seed]
    for c in candidates:
        if c in vectors and all(cosine(vectors[c], vectors[m]) >= threshold for m in group):
            group.append(c)
    return group


MEANS_ROUNDS = 8


@dataclass(frozen=True)
class Part:
    """One call's share of a large cluster (ADR 0041): its own nodes, which no other part owns, and
    the nodes it borrows as context, the most similar to its own among the other parts'."""

    own: list[str]
    borrowed: list[str]

    @property
    def shown(self) -> list[str]:
        return [*self.own, *self.borrowed]


def similarity_parts(
    ids: Sequence[str],
    vectors: Mapping[str, Vec],
    size: int,
    overlap: int,
    *,
    wanted: Callable[[Sequence[str]], bool] | None = None,
) -> list[Part]:
    """`ids` in parts of at most `size` nodes shown, alike nodes together, each part overlapping the
    others by the `overlap` nodes outside it that are the most similar to its own (by centroid).

    The own nodes come from splitting the set in two alike halves again and again (`_halves`), in
    O(n·d·log n); the ids' order breaks ties, so the same nodes give the same parts. Nodes without a
    vector comparable with most (none, or another model's dimension) fill their own parts, in order.
    `wanted`: which parts (by their own nodes) will be asked; the others borrow nothing, which spares
    their cost in a large cluster of which few parts are asked.
    """
    if len(ids) <= size:
        return [Part(list(ids), [])]
    dims = Counter(vectors[i].shape for i in ids if i in vectors)
    shape = dims.most_common(1)[0][0] if dims else None
    placed = [i for i in ids if i in vectors and vectors[i].shape == shape]
    in_place = set(placed)
    loose = [i for i in ids if i not in in_place]
    body = max(1, size - overlap)
    parts: list[Part] = []
    if placed:
        matrix = np.stack([vectors[i] for i in placed]).astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
        for rows in _packed(_halves(matrix, np.arange(len(placed)), body), body):
            own = [placed[r] for r in rows]
            asked = wanted is None or wanted(own)
            parts.append(Part(own, [placed[r] for r in _nearest(matrix, rows, overlap)] if asked else []))
    parts += [Part(loose[i : i + size], []) for i in range(0, len(loose), size)]
    return parts


def _nearest(matrix: npt.NDArray[np.float32], rows: list[int], k: int) -> list[int]:
    """The `k` rows outside `rows` the most similar to their centroid, most similar first (ties: lower
    row first); a partial selection, so a part costs O(n·d), not a sort of the whole cluster."""
    scores = matrix @ matrix[rows].mean(axis=0)
    scores[rows] = -np.inf
    k = min(k, len(scores) - len(rows))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k]
    return [int(r) for r in sorted(top.tolist(), key=lambda r: (-scores[r], r))]


def _halves(
    matrix: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], body: int
) -> list[npt.NDArray[np.int64]]:
    """`rows` split in two again and again until each group holds at most `body`, the groups in the
    order the splits leave them, so that neighbouring groups are alike too.

    A split is two-means from the first row and the row least like it (a few rounds suffice to keep
    groups of alike nodes whole); rows all alike are halved in order."""
    if len(rows) <= body:
        return [rows]
    x = matrix[rows]
    a, b = x[0], x[int(np.argmin(x @ x[0]))]
    side = (x @ a) >= (x @ b)
    for _ in range(MEANS_ROUNDS):
        if side.all() or not side.any():
            break
        a, b = x[side].mean(axis=0), x[~side].mean(axis=0)
        again = (x @ a) >= (x @ b)
        if (again == side).all():
            break
        side = again
    if side.all() or not side.any():
        side = np.arange(len(rows)) < len(rows) // 2
    return _halves(matrix, rows[side], body) + _halves(matrix, rows[~side], body)


def _packed(groups: list[npt.NDArray[np.int64]], body: int) -> list[list[int]]:
    """Neighbouring groups joined while they fit in `body`: fewer, fuller parts, fewer calls."""
    packed: list[list[int]] = []
    for group in groups:
        if packed and len(packed[-1]) + len(group) <= body:
            packed[-1] += group.tolist()
        else:
            packed.append(group.tolist())
    return packed


def fallback_cluster_name(nodes: Sequence[Mapping[str, Any]]) -> str:
    """ADR 0007 as ADR 0093 amends it: the most common theme that at least two members share (ties:
    alphabetical), else a neutral name. Never the words of one member: the name is the being's text
    (under its key, ADR 0076), so forgetting that member's note would leave them readable. (It was
    the first four words of the earliest member's action.)"""
    themes = Counter(t for n in nodes for t in {t.strip().lower() for t in n.get("themes", []) if t.strip()})
    shared = [(-count, theme) for theme, count in themes.items() if count >= 2]
    if shared:
        best: str = min(shared)[1]
        return best[:1].upper() + best[1:]
    return neutral_cluster_name(nodes)


def neutral_cluster_name(nodes: Sequence[Mapping[str, Any]]) -> str:
    """A name that quotes no member: the day of the earliest member's creation."""
    days = sorted(str(n["created_at"])[:10] for n in nodes if n.get("created_at"))
    return f"Memories from {days[0]}" if days else "Untitled topic"


# A small, fixed vocabulary: the fallback must be explainable and stable, not clever (ADR 0007).
BUSINESS_WORDS = frozenset(
    [
        "work",
        "job",
        "office",
        "meeting",
        "meetings",
        "project",
        "projects",
        "client",
        "clients",
        "customer",
        "customers",
        "deadline",
        "deadlines",
        "budget",
        "budgets",
        "finance",
        "invoice",
        "revenue",
        "sales",
        "contract",
        "boss",
        "manager",
        "colleague",
        "colleagues",
        "team",
        "hire",
        "hired",
        "hiring",
        "interview",
        "promotion",
        "salary",
        "launch",
        "release",
        "migration",
        "incident",
        "deploy",
        "deployment",
        "roadmap",
        "quarterly",
        "planning",
        "company",
        "startup",
        "investor",
        "investors",
        "board",
        "strategy",
        "product",
        "engineering",
        "engineer",
        "code",
        "review",
        "sprint",
        "report",
    ]
)


def classify_root_fallback(action: str, themes: Sequence[str] = ()) -> str:
    """Business when the action or themes use the business vocabulary, else Private."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", action)} | {t.lower() for t in themes}
    return "Business" if words & BUSINESS_WORDS else "Private"
