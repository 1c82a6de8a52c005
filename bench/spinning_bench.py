"""MiniLM with onnxruntime's idle threads spinning or waiting: one query embedding, and throughput.

`engram bench embedder-spinning [-- --rounds N --out FILE]`: alternates the two settings (ADR 0080), each round
a fresh session; 60 single query embeddings (p50/p95 ms) and 256 texts in batches of 64 (texts/s).
Only meaningful beside each other, on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.metrics import percentile
from bench.report import machine, now_utc

QUERIES = 60
TEXTS = 256


def measure(spinning: bool) -> dict[str, Any]:
    from engram.adapters.embedders.offline_minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder(spinning=spinning)  # its own session: the setting is part of the model's key
    embedder.embed(["load"])
    ms = []
    for i in range(QUERIES):
        started = time.perf_counter()
        embedder.embed([f"When did she go to the support group, time {i}?"])
        ms.append((time.perf_counter() - started) * 1000)
    texts = [
        f"2023-05-08 I went to a support group yesterday and it was so powerful ({i})" for i in range(TEXTS)
    ]
    started = time.perf_counter()
    for i in range(0, TEXTS, 64):
        embedder.embed(texts[i : i + 64])
    seconds = time.perf_counter() - started
    return {
        "spinning": spinning,
        "query_ms": {"p50": round(percentile(ms, 50), 2), "p95": round(percentile(ms, 95), 2)},
        "texts_per_s": round(TEXTS / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    args = parser.parse_args()
    runs = [measure(spinning) for _ in range(args.rounds) for spinning in (True, False)]
    result = {"benchmark": "embedder-spinning", "date": now_utc(), "machine": machine(), "runs": runs}
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for r in runs:
        print(
            f"spinning={'on ' if r['spinning'] else 'off'}  query p50 {r['query_ms']['p50']} "
            f"p95 {r['query_ms']['p95']} ms  {r['texts_per_s']} texts/s"
        )
