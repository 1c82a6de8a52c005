"""Contextual vectors in the full ranking (`engram bench locomo-context-logic`; docs/recall.md).

`engram bench locomo-context` chooses, on the dense channel alone, how a turn's neighbours should
enter its vector. This runs the chosen windows through `query`'s own ranking (`services/ranking.py`'s
`rank`, ADR 0008's fusion and the speaker weight), on an ingested data dir, as `locomo-logic` does:
each question's lexical channel is read once from the data dir, and its semantic channel is the
exact cosine of the question with every memory of its conversation under each variant (today's
`<date> <text>` vector, the contextual vector alone, or a blend of the two: `a` x the contextual
cosine + (1 - a) x the turn's, or the max of the two). The blend's weight is chosen by leaving one
conversation out. A first row ranks today's vectors through the exact cosines too, so every variant
is compared with today's on the same footing (the data dir's HNSW row is printed beside it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import locomo
from bench.embedding_cache import CachedEmbedder
from bench.locomo_context import WINDOWS, Window, context_text
from bench.locomo_models import Matrix, _matrix, turn_text
from bench.locomo_tuning import (
    CANDIDATES,
    Case,
    Ranker,
    as_json,
    evaluate,
    objective,
    ranker,
    read_cases,
    render,
)
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.ports import Embedder
from engram.services.query_text import strip_words
from engram.services.ranking import PROFILES, Profile


def open_data(data_dir: Path, *, embedder: Embedder) -> Engram:
    """The data dir's engine, as `locomo_tuning.open_data` opens it, with `embedder` in it."""
    settings = Settings().model_copy(
        update={"data_dir": data_dir, "llm": "none", "database_url": None, "qdrant_url": None}
    )
    return bootstrap(settings, embedder=embedder)


Scorer = Callable[[Matrix, Matrix], Matrix]
"""(cosines with the turn's vectors, cosines with the contextual ones) → a memory's semantic score."""

BLENDS = (0.25, 0.5, 0.75)


def blend(a: float) -> Scorer:
    def run(turn: Matrix, ctx: Matrix) -> Matrix:
        return (1 - a) * turn + a * ctx

    return run


def _max(turn: Matrix, ctx: Matrix) -> Matrix:
    return np.maximum(turn, ctx)


@dataclasses.dataclass
class Dense:
    """Per conversation: its node ids in turn order, today's vectors and a window's."""

    ids: dict[str, list[str]]
    turn: dict[str, Matrix]
    context: dict[str, dict[str, Any]]
    """A window's matrix per conversation, or anything whose `@ q` gives each memory's cosine
    (`bench/locomo_pieces.Pieces`: a memory's best piece)."""
    questions: dict[int, Matrix]
    """id(case) → the question's vector, embedded as `query` embeds it."""


def dense_vectors(
    embedder: Embedder,
    conversations: Sequence[locomo.Conversation],
    cases: Sequence[Case],
    windows: Sequence[Window],
) -> Dense:
    ids: dict[str, list[str]] = {}
    turn: dict[str, Matrix] = {}
    context: dict[str, dict[str, Any]] = {w.name: {} for w in windows}
    by_ref: dict[str, dict[str, str]] = {}
    for case in cases:
        by_ref.setdefault(case.conversation, {v: k for k, v in case.refs.items()})
    for conv in conversations:
        refs = by_ref.get(conv.sample_id, {})
        at = [i for i, t in enumerate(conv.turns) if t.dia_id in refs]
        ids[conv.sample_id] = [refs[conv.turns[i].dia_id] for i in at]
        turn[conv.sample_id] = _matrix(embedder, [turn_text(conv.turns[i]) for i in at], query=False)
        for w in windows:
            context[w.name][conv.sample_id] = _matrix(
                embedder, [context_text(conv.turns, i, w) for i in at], query=False
            )
    texts = [strip_words(c.text, c.names) for c in cases]
    asked = _matrix(embedder, texts, query=True)
    return Dense(ids, turn, context, {id(c): asked[n] for n, c in enumerate(cases)})


def with_semantic(
    cases: Sequence[Case], dense: Dense, window: str | None, scorer: Scorer | None
) -> dict[int, Case]:
    """Each case with its semantic channel re-read as exact cosines under one variant."""
    out: dict[int, Case] = {}
    for case in cases:
        q = dense.questions[id(case)]
        sims = dense.turn[case.conversation] @ q
        if window is not None:
            ctx = dense.context[window][case.conversation] @ q
            sims = ctx if scorer is None else scorer(sims, ctx)
        top = np.argsort(-sims, kind="stable")[:CANDIDATES]
        ids = dense.ids[case.conversation]
        out[id(case)] = dataclasses.replace(case, semantic=[(ids[j], float(sims[j])) for j in top])
    return out


def over(variant: Mapping[int, Case], base: Ranker) -> Ranker:
    def run(case: Case, k: int) -> list[str]:
        return base(variant[id(case)], k)

    return run


def leave_one_out(cases: Sequence[Case], rankers: Sequence[tuple[str, Ranker]]) -> dict[str, Any]:
    """The variant best on four conversations, scored on the fifth, for each of the five."""
    conversations = list(dict.fromkeys(c.conversation for c in cases))
    chosen: dict[str, str] = {}
    fold: dict[str, Ranker] = {}
    for conv in conversations:
        train = [c for c in cases if c.conversation != conv]
        name, best = max(rankers, key=lambda nr: objective(evaluate(train, nr[1])))
        chosen[conv] = name
        fold[conv] = best

    def by_fold(case: Case, k: int) -> list[str]:
        return fold[case.conversation](case, k)

    return {"chosen": chosen, "held_out": evaluate(cases, by_fold)}


def data_dir_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments of a harness that re-ranks an ingested data dir (this one, `locomo_pieces`)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="a LoCoMo-format file (the development split)")
    parser.add_argument(
        "--reuse-data", type=Path, required=True, help="a data dir `engram bench locomo` ingested"
    )
    parser.add_argument("--cache", type=Path, default=None, help="the vector cache (kept for the next run)")
    parser.add_argument("--json-out", type=Path, default=None)
    return parser


def main() -> None:
    from bench.report import machine, now_utc
    from engram.adapters.embedders import build_embedder
    from engram.adapters.logging import configure_logging

    parser = data_dir_parser(__doc__)
    parser.add_argument(
        "--window", action="append", default=None, help="a window of locomo-context (repeatable)"
    )
    args = parser.parse_args()
    configure_logging("warning")
    known = {w.name: w for w in WINDOWS}
    names = args.window or ["prev1", "prev1+next1"]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown window(s) {unknown}; choose from {sorted(known)}")
    windows = [known[n] for n in names]
    conversations = locomo.load(args.path)
    inner = build_embedder(Settings())
    embedder: Embedder = CachedEmbedder(inner, args.cache) if args.cache is not None else inner
    # The questions' vectors come from the cache too: `read_cases` embeds through the data dir's engine.
    engram = open_data(args.reuse_data, embedder=embedder)
    try:
        cases = read_cases(engram, conversations)
        dense = dense_vectors(embedder, conversations, cases, windows)
    finally:
        engram.close()
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    default: Profile = PROFILES["default"]
    plain = ranker(default)
    rankers: list[tuple[str, Ranker]] = [
        ("default, HNSW channel (the data dir)", plain),
        ("default, today's vectors (exact cosines)", over(with_semantic(cases, dense, None, None), plain)),
    ]
    for w in windows:
        rankers.append(
            (f"default, {w.name} as the vector", over(with_semantic(cases, dense, w.name, None), plain))
        )
        rankers.append(
            (f"default, turn + {w.name}, max", over(with_semantic(cases, dense, w.name, _max), plain))
        )
        for a in BLENDS:
            rankers.append(
                (
                    f"default, turn + {w.name}, blend {a}",
                    over(with_semantic(cases, dense, w.name, blend(a)), plain),
                )
            )
    results = {name: evaluate(cases, r) for name, r in rankers}
    cv = leave_one_out(cases, rankers[1:])
    results["contextual variant, leave one conversation out"] = cv["held_out"]
    for name, result in results.items():
        print(render(name, result), flush=True)
    print(f"chosen per held-out conversation: {cv['chosen']}")
    report = {
        "benchmark": "locomo-context-logic",
        "date": now_utc(),
        "machine": machine(),
        "dataset": {"path": str(args.path), "questions": len(cases)},
        "windows": names,
        "cross_validation": cv["chosen"],
        "variants": {name: as_json(r) for name, r in results.items()},
    }
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
