"""Deterministic helpers of patrol: mutual-similarity groups, fallback names and root classification."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
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


def fallback_cluster_name(nodes: Sequence[Mapping[str, Any]]) -> str:
    """ADR 0007: the most common theme (ties: alphabetical), else the first words of the earliest action."""
    themes = Counter(t.strip().lower() for n in nodes for t in n.get("themes", []) if t.strip())
    if themes:
        best: str = min(themes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        return best[:1].upper() + best[1:]
    words = re.findall(r"\w+", str(nodes[0].get("action", "")) if nodes else "")
    return " ".join(words[:4]).capitalize() or "Untitled topic"


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
