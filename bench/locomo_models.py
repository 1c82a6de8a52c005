"""Embedders side by side on LoCoMo (`engram bench locomo-models`; docs/recall.md).

Dense alone, the choosing stage: every turn is embedded once per embedder as a node embeds it
(`<date> <text>`, `Scene.embed_text`), every question as `query` embeds it (without the speakers'
names), and each question ranks its own conversation's turns by cosine. Same questions, same
scoring (`bench.metrics`) as `engram bench locomo`, reported per category (with the 95% interval of
the mean) and per conversation, with the embedder's throughput and its cost per query embedding.
`--full` runs the whole `engram bench locomo` once per embedder instead. Vectors are cached per
embedder, role and text digest in `--cache`, so a second run embeds nothing again.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench import locomo
from bench.embedding_cache import CachedEmbedder
from bench.locomo import SCORED_CATEGORIES, Conversation
from bench.metrics import QuestionScore, percentile, score, summarise
from bench.report import machine, now_utc
from engram.domain.errors import InvalidInput
from engram.services.embedding_roles import embed_queries
from engram.services.ports import Embedder
from engram.services.query_text import strip_words
from engram.services.reading import MAX_QUERY_CHARS

KS = (1, 3, 5, 10)
QUERY_TIMING_SAMPLES = 50
"""Questions embedded one by one to time a query embedding (the rest are batched)."""
THROUGHPUT_SAMPLE = 256
"""Turns embedded, uncached, to measure an embedder's throughput."""

Progress = Callable[[str, int, int], None]
Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Candidate:
    name: str
    """What the report calls it, e.g. `offline` or `e5-small`."""
    embedder: Embedder


def turn_text(turn: locomo.Turn) -> str:
    """What a LoCoMo node embeds (`Scene.embed_text`: when, then action; no feeling)."""
    return f"{turn.date} {turn.action()}" if turn.date else turn.action()


def _matrix(embedder: Embedder, texts: Sequence[str], *, query: bool, batch: int = 64) -> Matrix:
    parts = []
    for i in range(0, len(texts), batch):
        chunk = texts[i : i + batch]
        found = embed_queries(embedder, chunk) if query else embedder.embed(chunk)
        parts.append(np.stack([np.frombuffer(e.data, dtype="<f4") for e in found]))
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, embedder.dim), np.float32)


def throughput(embedder: Embedder, texts: Sequence[str], questions: Sequence[str]) -> dict[str, Any]:
    """Texts/s over a fixed sample of turns (batches of 64, as the patrol embeds), and ms per query."""
    sample = list(texts[:THROUGHPUT_SAMPLE])
    embedder.embed(sample[:2])  # loads the model
    started = time.perf_counter()
    _matrix(embedder, sample, query=False)
    seconds = time.perf_counter() - started
    single_ms: list[float] = []
    for text in questions[:QUERY_TIMING_SAMPLES]:
        started = time.perf_counter()
        embed_queries(embedder, [text])
        single_ms.append((time.perf_counter() - started) * 1000)
    return {
        "texts": len(sample),
        "texts_per_s": round(len(sample) / seconds, 1) if seconds else None,
        "query_ms": {"p50": round(percentile(single_ms, 50), 2), "p95": round(percentile(single_ms, 95), 2)},
    }


def interval95(values: Sequence[float]) -> float:
    """Half-width of the normal 95% interval of the mean."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return round(1.96 * math.sqrt(var / n), 4)


def _group(scores: Sequence[QuestionScore]) -> dict[str, Any]:
    out = summarise(scores, [], KS)
    out.pop("latency_ms")
    out["ci95"] = {str(k): interval95([s.recall[k] for s in scores]) for k in (5, 10)}
    return out


def evaluate(
    conversations: Sequence[Conversation],
    candidates: Sequence[Candidate],
    *,
    cache: Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Rank every question's conversation turns by cosine, once per candidate; score and time."""
    if not candidates:
        raise InvalidInput("give at least one embedder")
    turns = [t for c in conversations for t in c.turns]
    texts = [turn_text(t) for t in turns]
    questions = [(c, q) for c in conversations for q in c.questions if q.evidence]
    # As `query` embeds a question: the speakers' names left out (they are matched on the actors).
    qtexts = [strip_words(q.text[:MAX_QUERY_CHARS], c.speakers) for c, q in questions]
    owner = np.array([c.index for c in conversations for _ in c.turns])
    refs = [t.dia_id for t in turns]
    results: dict[str, Any] = {}
    for n, cand in enumerate(candidates, 1):
        cached = CachedEmbedder(cand.embedder, cache) if cache is not None else cand.embedder
        stored = _matrix(cached, texts, query=False)
        asked = _matrix(cached, qtexts, query=True)
        if isinstance(cached, CachedEmbedder):
            cached.save()
        cost = throughput(cand.embedder, texts, qtexts)
        by_category: dict[int | str, list[QuestionScore]] = {}
        by_conversation: dict[str, list[QuestionScore]] = {}
        for i, (conv, q) in enumerate(questions):
            rows = np.flatnonzero(owner == conv.index)
            sims = stored[rows] @ asked[i]
            top = rows[np.argsort(-sims, kind="stable")[: max(KS)]]
            s = score(q.evidence, [refs[j] for j in top], KS)
            by_category.setdefault(q.category, []).append(s)
            if q.category in SCORED_CATEGORIES:
                by_conversation.setdefault(conv.sample_id, []).append(s)
        scored = [s for c in SCORED_CATEGORIES for s in by_category.get(c, [])]
        results[cand.name] = {
            "embedding_model": cand.embedder.model_id,
            "dim": cand.embedder.dim,
            "embed": cost,
            "overall": {"label": "overall 1-4", **_group(scored)},
            "categories": {
                str(c): {"label": locomo.category_label(c), **_group(by_category[c])}
                for c in sorted(by_category, key=str)
            },
            "conversations": {k: _group(v) for k, v in by_conversation.items()},
        }
        if progress:
            progress("embedders", n, len(candidates))
    return {
        "benchmark": "locomo-models",
        "date": now_utc(),
        "machine": machine(),
        "dataset": {
            "conversations": len(conversations),
            "turns": len(turns),
            "questions": len(questions),
        },
        "config": {"retrieval": "dense cosine over the conversation's turns", "ks": list(KS)},
        "embedders": results,
    }


def render(report: dict[str, Any]) -> str:
    lines = ["LoCoMo, dense retrieval alone, per embedder (recall@5 / @10 ± 95% interval)"]
    for name, r in report["embedders"].items():
        o = r["overall"]
        e = r["embed"]
        lines.append(
            f"{name} ({r['embedding_model']}): overall {o['recall']['5']:.3f} / {o['recall']['10']:.3f} "
            f"± {o['ci95']['10']:.3f}; {e['texts_per_s']} texts/s; "
            f"query embed p95 {e['query_ms']['p95']} ms"
        )
        for g in r["categories"].values():
            lines.append(
                f"  {g['label']:<16} {g['recall']['5']:.3f} / {g['recall']['10']:.3f} ± {g['ci95']['10']:.3f}"
            )
        for c, g in r["conversations"].items():
            lines.append(f"  {c:<16} {g['recall']['5']:.3f} / {g['recall']['10']:.3f}")
    return "\n".join(lines)


def full(
    path: Path,
    names: Sequence[str],
    *,
    cache: Path | None,
    profiles: Sequence[str] = ("default",),
    limit: int | None = None,
) -> dict[str, Any]:
    """`engram bench locomo` once per embedder (the whole `query`), each with its vectors cached.

    The report keeps `engram bench locomo`'s shape for the first embedder (`profiles → default →
    overall → recall`) and holds every embedder's own report, with per-conversation figures, under
    `embedders`.
    """
    from bench.run_locomo import LocomoOptions, run
    from engram.adapters.embedders import build_embedder
    from engram.services.config import Settings

    out: dict[str, Any] = {}
    for name in names:
        settings = Settings(embedder=name)
        inner = build_embedder(settings)
        embedder: Embedder = CachedEmbedder(inner, cache) if cache is not None else inner
        result = run(
            LocomoOptions(path=path, profiles=tuple(profiles), limit_conversations=limit),
            settings,
            engram_factory=functools.partial(_bootstrap_with, embedder),
        )
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
        report = result.report
        report["conversations"] = per_conversation(result.questions, profiles)
        add_intervals(report, result.questions, profiles)
        out[name] = report
    first = next(iter(out.values()))
    return {**first, "benchmark": "locomo-embedders", "embedders": out}


def _bootstrap_with(embedder: Embedder, settings: Any) -> Any:
    from engram.services.bootstrap import bootstrap

    return bootstrap(settings, embedder=embedder)


def add_intervals(
    report: dict[str, Any], questions: Sequence[dict[str, Any]], profiles: Sequence[str]
) -> None:
    """`ci95` beside each category's and the overall recall@5/@10 (the bench's own report has none)."""
    for name in profiles:
        groups: dict[str, list[dict[int, float]]] = {}
        for q in questions:
            entry = q["profiles"].get(name, {})
            if "recall" in entry:
                groups.setdefault(str(q["category"]), []).append(entry["recall"])
        scored = [r for c, rs in groups.items() if c in {str(x) for x in SCORED_CATEGORIES} for r in rs]
        figures = report["profiles"][name]
        figures["overall"]["ci95"] = {str(k): interval95([r[k] for r in scored]) for k in (5, 10)}
        for c, g in figures["categories"].items():
            g["ci95"] = {str(k): interval95([r[k] for r in groups.get(c, [])]) for k in (5, 10)}


def per_conversation(questions: Sequence[dict[str, Any]], profiles: Sequence[str]) -> dict[str, Any]:
    """Recall@5/@10 (categories 1–4) per conversation and profile, from the bench's per-question details."""
    out: dict[str, Any] = {}
    for name in profiles:
        groups: dict[str, list[dict[int, float]]] = {}
        for q in questions:
            entry = q["profiles"].get(name, {})
            if q["category"] in SCORED_CATEGORIES and "recall" in entry:
                groups.setdefault(q["conversation"], []).append(entry["recall"])
        out[name] = {
            conv: {
                "questions": len(rs),
                "recall": {str(k): round(sum(r[k] for r in rs) / len(rs), 4) for k in (5, 10)},
                "ci95": {str(k): interval95([r[k] for r in rs]) for k in (5, 10)},
            }
            for conv, rs in groups.items()
        }
    return out


def main() -> None:
    import argparse
    import json

    from engram.adapters.embedders import build_embedder
    from engram.services.config import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="a LoCoMo-format file (../shared/bench/locomo-dev.json)")
    parser.add_argument(
        "--embedder",
        action="append",
        default=None,
        help="an ENGRAM_EMBEDDER value (repeatable); default: offline and e5-small",
    )
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="keep the vectors here for the next run")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    parser.add_argument(
        "--full",
        action="store_true",
        help="run the whole `engram bench locomo` (ingest, patrol, query) per embedder instead of dense alone",
    )
    parser.add_argument("--profile", action="append", default=None, help="with --full; default: default")
    args = parser.parse_args()
    names = list(dict.fromkeys(args.embedder or ["offline", "e5-small"]))
    if args.full:
        report = full(
            args.path,
            names,
            cache=args.cache,
            profiles=args.profile or ["default"],
            limit=args.limit_conversations,
        )
        if args.out is not None:
            args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(render_full(report))
        return
    candidates = [Candidate(n, build_embedder(Settings(embedder=n))) for n in names]
    report = evaluate(locomo.load(args.path, args.limit_conversations), candidates, cache=args.cache)
    report["dataset"]["path"] = str(args.path)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(render(report))


def render_full(report: dict[str, Any]) -> str:
    lines = ["LoCoMo, the whole query, per embedder (recall@5 / @10, categories 1-4)"]
    for name, r in report["embedders"].items():
        for profile_name, p in r["profiles"].items():
            o = p["overall"]
            lines.append(
                f"{name} {profile_name}: {o['recall']['5']:.3f} / {o['recall']['10']:.3f}; "
                f"query p95 {p['latency_ms']['p95']} ms; ingest {r['ingest'].get('total_s')} s"
            )
            for g in p["categories"].values():
                lines.append(f"  {g['label']:<16} {g['recall']['5']:.3f} / {g['recall']['10']:.3f}")
            for conv, g in r["conversations"][profile_name].items():
                lines.append(f"  {conv:<16} {g['recall']['5']:.3f} / {g['recall']['10']:.3f}")
    return "\n".join(lines)
