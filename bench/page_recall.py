"""The models section of docs/benchmarks.md (issue #15, docs/recall.md): embedders side by side on LoCoMo.

Result files: `locomo-models.json` (dense retrieval alone, `engram bench locomo-models`),
`locomo-embedders.json` (the whole `query` per embedder, `engram bench locomo-models --full`) and
`embedder-spinning.json` (`engram bench embedder-spinning`).
"""

from __future__ import annotations

from typing import Any

from bench.page import Result, _ms, _section, table


def _pair(g: dict[str, Any]) -> str:
    return f"{g['recall']['5']:.3f} / {g['recall']['10']:.3f}"


def _side_by_side(embedders: dict[str, Any], groups: Any, label: Any) -> list[list[str]]:
    rows = []
    for key in groups:
        cells = [label(key)]
        for r in embedders.values():
            g = r.get(key)
            cells.append(_pair(g) + (f" ± {g['ci95']['10']:.3f}" if "ci95" in g else "") if g else "–")
        rows.append(cells)
    return rows


def dense(r: Result) -> str:
    embedders: dict[str, Any] = r["embedders"]
    names = list(embedders)
    first = embedders[names[0]]
    flat = {
        n: {"overall": e["overall"], **e["categories"], **e["conversations"]} for n, e in embedders.items()
    }
    keys = ["overall", *first["categories"], *first["conversations"]]
    labels = {k: g["label"] for k, g in first["categories"].items()} | {"overall": "**overall 1–4**"}
    rows = _side_by_side(flat, keys, lambda k: labels.get(k, k))
    rows.append(["texts/s (batches of 64)", *[str(e["embed"]["texts_per_s"]) for e in embedders.values()]])
    rows.append(["query embedding p95 ms", *[_ms(e["embed"]["query_ms"]["p95"]) for e in embedders.values()]])
    header = ["R@5 / R@10 (± 95%)", *[f"{n} ({e['embedding_model']})" for n, e in embedders.items()]]
    body = [
        "Each question ranks its conversation's turns by the cosine alone (no BM25, no recency), the "
        "turns embedded as a node embeds them and the questions as `query` embeds them. The choosing "
        "stage of docs/recall.md; the whole `query` is the next section.",
        table(header, rows, "l" + "r" * len(names)),
    ]
    return _section("LoCoMo: embedders, dense alone", "engram bench locomo-models PATH", r, body)


def full(r: Result) -> str:
    embedders: dict[str, Any] = r["embedders"]
    names = list(embedders)
    profiles = list(embedders[names[0]]["profiles"])
    blocks = []
    for profile in profiles:
        first = embedders[names[0]]["profiles"][profile]
        flat = {
            n: {
                "overall": e["profiles"][profile]["overall"],
                **e["profiles"][profile]["categories"],
                **e["conversations"][profile],
            }
            for n, e in embedders.items()
        }
        keys = ["overall", *first["categories"], *embedders[names[0]]["conversations"][profile]]
        labels = {k: g["label"] for k, g in first["categories"].items()} | {"overall": "**overall 1–4**"}
        rows = _side_by_side(flat, keys, lambda k, labels=labels: labels.get(k, k))
        rows.append(
            [
                "query p50 / p95 ms (vectors from the cache)",
                *[
                    f"{_ms(e['profiles'][profile]['latency_ms']['p50'])} / "
                    f"{_ms(e['profiles'][profile]['latency_ms']['p95'])}"
                    for e in embedders.values()
                ],
            ]
        )
        header = [
            f"profile {profile}: R@5 / R@10",
            *[f"{n} ({e['config']['embedding_model']})" for n, e in embedders.items()],
        ]
        blocks.append(table(header, rows, "l" + "r" * len(names)))
    body = [
        "The whole `engram bench locomo` (ingest, patrol, `query`) once per embedder in one run, vectors "
        "cached between runs (so the latency is `query` without its embedding, on the loaded machine; "
        "the embedders' own cost is in the section above); categories with the 95% interval of R@10, "
        "conversations over categories 1–4. Verdicts and ADRs in docs/recall.md.",
        *blocks,
    ]
    return _section("LoCoMo: embedders, the whole query", "engram bench locomo-models PATH --full", r, body)


def spinning(r: Result) -> str:
    rows = [
        [
            "on (onnxruntime's default)" if run["spinning"] else "**off** (Engram's setting)",
            _ms(run["query_ms"]["p50"]),
            _ms(run["query_ms"]["p95"]),
            f"{run['texts_per_s']:.1f}",
        ]
        for run in r["runs"]
    ]
    body = [
        "MiniLM with onnxruntime's idle intra-op threads spinning or waiting, alternated in one run: 60 "
        "single query embeddings and 256 texts in batches of 64 (ADR 0080).",
        table(["idle threads spin", "query p50 ms", "query p95 ms", "texts/s"], rows, "lrrr"),
    ]
    return _section("MiniLM: spinning threads", "engram bench embedder-spinning", r, body)


def render(results: dict[str, Result]) -> str | None:
    parts = [
        *([dense(results["locomo-models"])] if "locomo-models" in results else []),
        *([full(results["locomo-embedders"])] if "locomo-embedders" in results else []),
        *([spinning(results["embedder-spinning"])] if "embedder-spinning" in results else []),
    ]
    return "\n\n".join(parts) if parts else None
