"""Contextual vectors on LoCoMo, dense retrieval alone (`engram bench locomo-context`; docs/recall.md).

A LoCoMo turn is short and leans on the turn before it ("Yes! It was amazing." answers "Did you go
to the concert?"): its vector alone cannot find it. Each variant here embeds a turn with its
neighbours in the same session (the one before, the two before, the one before and the one after),
with or without the speakers' names, either as the memory's only vector or as a second vector beside
today's `<date> <text>` (a memory then scores the max, or the sum, of its two cosines). Every variant
is scored on the same questions as `engram bench locomo-models` (the question embedded as `query`
embeds it), per category with the 95% interval and per conversation, side by side with today's in
the same run. Vectors are cached by model, role and text (`--cache`), so only new texts cost.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import locomo
from bench.embedding_cache import CachedEmbedder
from bench.locomo import SCORED_CATEGORIES, Conversation, Turn
from bench.locomo_models import KS, Matrix, _group, _matrix, turn_text
from bench.metrics import QuestionScore, score
from bench.report import machine, now_utc
from engram.services.ports import Embedder
from engram.services.query_text import strip_words
from engram.services.reading import MAX_QUERY_CHARS

Neighbours = tuple[list[Turn], list[Turn]]
"""(turns before, nearest first; turns after, nearest first) in the same session."""


@dataclass(frozen=True)
class Window:
    """Which neighbours go into a contextual text, and how each line is written."""

    name: str
    before: int
    after: int
    speakers: bool


WINDOWS = (
    Window("turn names", 0, 0, True),
    Window("prev1", 1, 0, False),
    Window("prev1 names", 1, 0, True),
    Window("prev2", 2, 0, False),
    Window("prev2 names", 2, 0, True),
    Window("prev1+next1", 1, 1, False),
    Window("prev1+next1 names", 1, 1, True),
)


def neighbours(turns: Sequence[Turn], at: int, before: int, after: int) -> Neighbours:
    """The turns around `turns[at]` in its own session (a session boundary ends the window)."""
    here = turns[at]
    prev = [turns[j] for j in range(at - 1, at - 1 - before, -1) if j >= 0]
    nxt = [turns[j] for j in range(at + 1, at + 1 + after) if j < len(turns)]
    return (
        [t for t in prev if t.session == here.session],
        [t for t in nxt if t.session == here.session],
    )


def _line(turn: Turn, speakers: bool) -> str:
    return f"{turn.speaker}: {turn.action()}" if speakers else turn.action()


def context_text(turns: Sequence[Turn], at: int, window: Window) -> str:
    """`<date> <before…> <the turn> <after…>`, in conversation order."""
    prev, nxt = neighbours(turns, at, window.before, window.after)
    here = turns[at]
    lines = [_line(t, window.speakers) for t in reversed(prev)]
    lines.append(_line(here, window.speakers))
    lines += [_line(t, window.speakers) for t in nxt]
    body = " ".join(lines)
    return f"{here.date} {body}" if here.date else body


Combine = Callable[[Matrix, Matrix], Matrix]


def _max(a: Matrix, b: Matrix) -> Matrix:
    return np.maximum(a, b)


def _sum(a: Matrix, b: Matrix) -> Matrix:
    return a + b


def variants_of(windows: Sequence[Window]) -> list[tuple[str, str | None, Combine | None]]:
    """(variant name, window name or None for today's, how two cosines combine or None for one vector)."""
    out: list[tuple[str, str | None, Combine | None]] = [("today: <date> <text>", None, None)]
    for w in windows:
        out.append((f"{w.name} as the vector", w.name, None))
        out.append((f"turn + {w.name}, max of cosines", w.name, _max))
        out.append((f"turn + {w.name}, sum of cosines", w.name, _sum))
    return out


def evaluate(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    windows: Sequence[Window] = WINDOWS,
) -> dict[str, Any]:
    """Every variant's recall per category and conversation, on one embedder's vectors."""
    turns = [t for c in conversations for t in c.turns]
    owner = np.array([c.index for c in conversations for _ in c.turns])
    refs = [t.dia_id for t in turns]
    texts: dict[str | None, list[str]] = {None: [turn_text(t) for t in turns]}
    for w in windows:
        texts[w.name] = [context_text(c.turns, i, w) for c in conversations for i in range(len(c.turns))]
    stored = {name: _matrix(embedder, t, query=False) for name, t in texts.items()}
    questions = [(c, q) for c in conversations for q in c.questions if q.evidence]
    qtexts = [strip_words(q.text[:MAX_QUERY_CHARS], c.speakers) for c, q in questions]
    asked = _matrix(embedder, qtexts, query=True)
    out: dict[str, Any] = {}
    for name, window, combine in variants_of(windows):
        by_category: dict[int | str, list[QuestionScore]] = {}
        by_conversation: dict[str, list[QuestionScore]] = {}
        for i, (conv, q) in enumerate(questions):
            rows = np.flatnonzero(owner == conv.index)
            if window is None:
                sims = stored[None][rows] @ asked[i]
            elif combine is None:
                sims = stored[window][rows] @ asked[i]
            else:
                sims = combine(stored[None][rows] @ asked[i], stored[window][rows] @ asked[i])
            top = rows[np.argsort(-sims, kind="stable")[: max(KS)]]
            s = score(q.evidence, [refs[j] for j in top], KS)
            by_category.setdefault(q.category, []).append(s)
            if q.category in SCORED_CATEGORIES:
                by_conversation.setdefault(conv.sample_id, []).append(s)
        scored = [s for c in SCORED_CATEGORIES for s in by_category.get(c, [])]
        out[name] = {
            "overall": {"label": "overall 1-4", **_group(scored)},
            "categories": {
                str(c): {"label": locomo.category_label(c), **_group(by_category[c])}
                for c in sorted(by_category, key=str)
            },
            "conversations": {k: _group(v) for k, v in by_conversation.items()},
        }
    return {
        "benchmark": "locomo-context",
        "date": now_utc(),
        "machine": machine(),
        "embedding_model": embedder.model_id,
        "dataset": {
            "conversations": len(conversations),
            "turns": len(turns),
            "questions": len(questions),
        },
        "config": {"retrieval": "dense cosine over the conversation's turns", "ks": list(KS)},
        "variants": out,
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"LoCoMo, dense alone, contextual vectors ({report['embedding_model']}): R@5 / R@10 ± CI"]
    for name, r in report["variants"].items():
        o = r["overall"]
        cats = " ".join(f"c{c}={g['recall']['10']:.3f}" for c, g in r["categories"].items() if c != "5")
        convs = " ".join(f"{c[-2:]}={g['recall']['10']:.3f}" for c, g in r["conversations"].items())
        lines.append(
            f"{o['recall']['5']:.3f} / {o['recall']['10']:.3f} ± {o['ci95']['10']:.3f} | {cats} | {convs} | {name}"
        )
    return "\n".join(lines)


def main() -> None:
    from engram.adapters.embedders import build_embedder
    from engram.adapters.logging import configure_logging
    from engram.services.config import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="a LoCoMo-format file (../shared/bench/locomo-dev.json)")
    parser.add_argument("--embedder", default="offline", help="an ENGRAM_EMBEDDER value")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="keep the vectors here for the next run")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    args = parser.parse_args()
    configure_logging("warning")
    inner = build_embedder(Settings(embedder=args.embedder))
    embedder: Embedder = CachedEmbedder(inner, args.cache) if args.cache is not None else inner
    try:
        report = evaluate(locomo.load(args.path, args.limit_conversations), embedder)
    finally:
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    report["dataset"]["path"] = str(args.path)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(render(report))


if __name__ == "__main__":
    main()
