"""What a link threshold means on LoCoMo (ADR 0062): cosine between turns that belong together and
between turns that do not, for each embedder.

    .venv/bin/python scripts/link_similarity.py ../shared/bench/locomo-dev.json [--embedder offline|hashing]

Embeds every turn of the file as the LoCoMo benchmark's nodes are embedded (`when action`, the
scene's `embed_text`). "Together": the evidence turns of one question (multi-hop questions need
several), within a conversation. "Apart": random pairs of turns of one conversation (fixed seed).
Prints, per threshold, the share of each kind of pair at or above it, and the links per memory a
threshold would give (the nearest 10 kept, as the `links` step does).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from bench import locomo
from engram.adapters.embedders import build_embedder
from engram.services.config import Settings

THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--embedder", default="offline", choices=["offline", "hashing"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = build_embedder(Settings(embedder=args.embedder, llm="none"))
    rng = random.Random(7)
    together: list[float] = []
    apart: list[float] = []
    per_memory: list[int] = []
    by_category: dict[str, list[float]] = {}
    for conv in locomo.load(args.locomo, None):
        texts = [f"{t.date} {t.action()}" for t in conv.turns]
        vectors = np.asarray(
            [np.asarray(e.floats(), dtype=np.float32) for e in embedder.embed(texts)], dtype=np.float32
        )
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index = {t.dia_id: i for i, t in enumerate(conv.turns)}
        sims = vectors @ vectors.T
        for q in conv.questions:
            ids = [index[e] for e in q.evidence if e in index]
            for a, b in itertools.combinations(ids, 2):
                together.append(float(sims[a, b]))
                by_category.setdefault(str(q.category), []).append(float(sims[a, b]))
        n = len(texts)
        for _ in range(5 * n):
            a, b = rng.randrange(n), rng.randrange(n)
            if a != b:
                apart.append(float(sims[a, b]))
        np.fill_diagonal(sims, -1.0)
        per_memory += [int(min(10, (row >= 0.7).sum())) for row in sims]
    report: dict[str, Any] = {
        "embedder": embedder.model_id,
        "pairs": {"together": len(together), "apart": len(apart)},
        "median": {"together": float(np.median(together)), "apart": float(np.median(apart))},
        "p90_apart": float(np.quantile(apart, 0.9)),
        "p99_apart": float(np.quantile(apart, 0.99)),
        "at_or_above": {
            str(t): {
                "together": round(sum(s >= t for s in together) / len(together), 4),
                "apart": round(sum(s >= t for s in apart) / len(apart), 4),
                **{
                    f"together_cat{c}": round(sum(s >= t for s in v) / len(v), 4)
                    for c, v in sorted(by_category.items())
                },
            }
            for t in THRESHOLDS
        },
        "links_per_memory_at_0.7": {
            "mean": round(float(np.mean(per_memory)), 2),
            "none": round(sum(1 for v in per_memory if v == 0) / len(per_memory), 4),
            "p90": int(np.quantile(per_memory, 0.9)),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
