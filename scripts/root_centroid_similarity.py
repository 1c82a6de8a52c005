"""How often a new memory matches the centroid of a root that holds unrelated memories (ADR 0042).

    .venv/bin/python scripts/root_centroid_similarity.py ../shared/bench/locomo-dev.json [--prefix]

Embeds 900 conversation turns of the LoCoMo file (shuffled with a fixed seed) with the offline MiniLM
embedder; 300 of them play new memories, the rest fill a root. Prints how many pairs of single turns
reach the cluster threshold, and how many new memories reach it against the centroid of a root of N
turns. `--prefix` embeds each turn as `[date] speaker: text`, as the LoCoMo benchmark does.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from engram.adapters.embedders.offline_minilm import MiniLMEmbedder
from engram.services.thresholds import MINILM


def turns(path: Path, prefix: bool) -> list[str]:
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for key, session in conversation.items():
            if key.startswith("session_") and isinstance(session, list):
                date = conversation.get(f"{key}_date_time", "")
                out += [f"[{date}] {t['speaker']}: {t['text']}" if prefix else t["text"] for t in session]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--prefix", action="store_true")
    args = parser.parse_args()
    texts = turns(args.locomo, args.prefix)
    random.Random(1).shuffle(texts)
    vectors = np.array([e.floats() for e in MiniLMEmbedder().embed(texts[:900])], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    new, root = vectors[:300], vectors[300:]
    threshold = MINILM.cluster
    pairs = new @ root[:300].T
    print(f"pairs of single turns: {np.mean(pairs >= threshold):.1%} reach {threshold}")
    for n in (3, 10, 30, 100, 300, 600):
        centroid = root[:n].mean(axis=0)
        scores = new @ (centroid / np.linalg.norm(centroid))
        print(f"root of {n:3d} turns: {np.mean(scores >= threshold):.1%} of new memories reach {threshold}")


if __name__ == "__main__":
    main()
