"""Finer vectors on LoCoMo: a memory's text in pieces (`engram bench locomo-pieces`; docs/recall.md).

A turn that opens a session holds a greeting and several pieces of news ("Hey Audrey! … Last
weekend my girlfriend and I went fishing"): its one vector is the mean of all of them, diluted.
Each split here cuts a memory's text into sentences, or into pieces of at most N MiniLM tokens
(whole sentences packed together while they fit, a longer sentence cut between words), embeds each
piece as a node embeds its text (`<date> <piece>`), and scores the memory by its best piece: alone
(`pieces, max`), with today's whole-turn vector (`turn + pieces, max`), or in a blend `a` x the best
piece + (1 - a) x the turn's cosine. A memory of one piece keeps its one vector (no extra cost).

Both stages in one run, on an ingested data dir, beside today's vectors: the dense channel alone
(each question's top 10 by cosine) and the full ranking (`rank`, the default profile, with its
lexical channel read from the data dir and the semantic channel re-read as exact cosines, as
`locomo-context-logic` does). Each variant's gain over today's comes with a paired 95 % interval
(bootstrap over the questions), overall and on multi-hop, and the family is chosen by leaving one
conversation out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench import locomo
from bench.embedding_cache import CachedEmbedder
from bench.locomo_context_logic import (
    BLENDS,
    Dense,
    Scorer,
    _max,
    blend,
    data_dir_parser,
    dense_vectors,
    leave_one_out,
    open_data,
    over,
    with_semantic,
)
from bench.locomo_feedback import paired_difference
from bench.locomo_models import Matrix, _matrix
from bench.locomo_tuning import Case, Ranker, as_json, evaluate, ranker, read_cases, render
from engram.services.ports import Embedder
from engram.services.ranking import PROFILES

Count = Callable[[str], int]
"""A text → its number of MiniLM word-piece tokens (no special tokens)."""

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\s+(?=\[shared an image: )")
"""Where a turn's sentences end; an image's caption is a piece of its own."""


@dataclasses.dataclass(frozen=True)
class Split:
    """How a memory's text is cut: one sentence a piece (`tokens` None), or sentences packed into
    pieces of at most `tokens` tokens."""

    name: str
    tokens: int | None


SPLITS = (
    Split("sentences", None),
    *(Split(f"{n} tokens", n) for n in (24, 28, 32, 40, 48)),
)
"""28 and 40 were added after the first run found 32 best, to see whether it is a peak or a plateau."""


def sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


def _pack(parts: Sequence[str], limit: int, count: Count) -> list[str]:
    """`parts` joined in order into runs of at most `limit` tokens (a part longer alone stays alone)."""
    out: list[list[str]] = [[]]
    used = 0
    for part in parts:
        n = count(part)
        if out[-1] and used + n > limit:
            out.append([])
            used = 0
        out[-1].append(part)
        used += n
    return [" ".join(p) for p in out if p]


def pieces(text: str, split: Split, count: Count) -> list[str]:
    """`text` cut as `split` says, in order; a text that fits is one piece (itself). With a token
    limit, whole sentences are packed while they fit; a longer sentence is cut between words."""
    found = sentences(text)
    if split.tokens is None or (len(found) <= 1 and count(text) <= split.tokens):
        return found or [text]
    limit = split.tokens
    return _pack([p for s in found for p in _pack(s.split(), limit, count)], limit, count)


@functools.cache
def minilm_count() -> Count:
    """MiniLM's own tokenizer (vendored with the engine), counting word pieces without [CLS]/[SEP]."""
    from tokenizers import Tokenizer

    from engram.adapters.embedders.minilm_model import _read_vendored_tokenizer

    tokenizer = Tokenizer.from_str(_read_vendored_tokenizer())
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


@dataclasses.dataclass(frozen=True)
class Pieces:
    """A conversation's piece vectors: memory i owns rows `starts[i]` up to the next start. A memory
    of one piece owns one row, its whole-turn vector (nothing more was embedded for it)."""

    vectors: Matrix
    starts: Any

    def __matmul__(self, q: Matrix) -> Matrix:
        """Each memory's best piece cosine with `q` (so that `with_semantic` reads it as a window)."""
        out: Matrix = np.maximum.reduceat(self.vectors @ q, self.starts)
        return out


@dataclasses.dataclass(frozen=True)
class Cost:
    memories: int
    split: int
    """Memories cut into more than one piece."""
    extra: int
    """Vectors beyond one per memory when the whole-turn vector is kept (every piece of a split memory)."""
    tokens_ratio: float
    """Tokens embedded for a memory's pieces and its whole text, over its whole text's alone."""

    def as_json(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "split": self.split,
            "extra_vectors": self.extra,
            "extra_per_memory": round(self.extra / self.memories, 3) if self.memories else 0.0,
            "tokens_ratio": round(self.tokens_ratio, 3),
        }


def piece_vectors(
    embedder: Embedder,
    conversations: Sequence[locomo.Conversation],
    cases: Sequence[Case],
    dense: Dense,
    split: Split,
    count: Count,
) -> tuple[dict[str, Pieces], Cost]:
    """Every memory's pieces under `split`, embedded as a node embeds (`<date> <piece>`)."""
    out: dict[str, Pieces] = {}
    refs_of = {c.conversation: c.refs for c in cases}
    memories = cut = extra = 0
    whole_tokens = piece_tokens = 0
    for conv in conversations:
        by_ref = {t.dia_id: t for t in conv.turns}
        refs = [refs_of[conv.sample_id][i] for i in dense.ids[conv.sample_id]]
        texts: list[str] = []
        rows: list[tuple[int, int]] = []  # (memory, index into texts) or (memory, -1): its turn vector
        starts: list[int] = []
        for m, ref in enumerate(refs):
            turn = by_ref[ref]
            found = pieces(turn.action(), split, count)
            starts.append(len(rows))
            memories += 1
            whole_tokens += count(turn.action())
            if len(found) <= 1:
                rows.append((m, -1))
                continue
            cut += 1
            extra += len(found)
            for p in found:
                piece_tokens += count(p)
                rows.append((m, len(texts)))
                texts.append(f"{turn.date} {p}" if turn.date else p)
        embedded = _matrix(embedder, texts, query=False)
        turn_vectors = dense.turn[conv.sample_id]
        vectors = np.stack([turn_vectors[m] if j < 0 else embedded[j] for m, j in rows])
        out[conv.sample_id] = Pieces(vectors, np.array(starts, dtype=np.intp))
    ratio = (whole_tokens + piece_tokens) / whole_tokens if whole_tokens else 1.0
    return out, Cost(memories, cut, extra, ratio)


def top_dense(variant: dict[int, Case]) -> Ranker:
    """The dense channel alone: the k memories of best semantic score."""

    def run(case: Case, k: int) -> list[str]:
        return [i for i, _ in variant[id(case)].semantic[:k]]

    return run


def scorers() -> list[tuple[str, Scorer | None]]:
    out: list[tuple[str, Scorer | None]] = [("pieces, max", None), ("turn + pieces, max", _max)]
    out += [(f"turn + pieces, blend {a}", blend(a)) for a in BLENDS]
    return out


def opens_session(ref: str) -> bool:
    """A LoCoMo turn `D<session>:1` opens its session (the diluted turns this is about)."""
    return ref.endswith(":1")


def paired(cases: Sequence[Case], variant: Ranker, base: Ranker) -> dict[str, Any]:
    """The paired gain over `base`, overall, on the multi-hop questions, and on the questions with a
    session's opening turn among their evidence."""
    multi = [c for c in cases if c.category == 1]
    openers = [c for c in cases if any(opens_session(e) for e in c.evidence)]
    return {
        "overall": paired_difference(cases, variant, base),
        "1": paired_difference(multi, variant, base),
        "openers": paired_difference(openers, variant, base),
    }


def main() -> None:
    from bench.report import machine, now_utc
    from engram.adapters.embedders import build_embedder
    from engram.adapters.logging import configure_logging
    from engram.services.config import Settings

    parser = data_dir_parser(__doc__)
    parser.add_argument(
        "--split",
        action="append",
        default=None,
        help=f"a split (repeatable; default all): {', '.join(s.name for s in SPLITS)}",
    )
    args = parser.parse_args()
    configure_logging("warning")
    known = {s.name: s for s in SPLITS}
    unknown = [n for n in args.split or [] if n not in known]
    if unknown:
        parser.error(f"unknown split(s) {unknown}; choose from {sorted(known)}")
    splits = [known[n] for n in args.split] if args.split else list(SPLITS)
    conversations = locomo.load(args.path)
    inner = build_embedder(Settings())
    embedder: Embedder = CachedEmbedder(inner, args.cache) if args.cache is not None else inner
    count = minilm_count()
    engram = open_data(args.reuse_data, embedder=embedder)
    try:
        cases = read_cases(engram, conversations)
        dense = dense_vectors(embedder, conversations, cases, [])
        costs: dict[str, Cost] = {}
        for split in splits:
            dense.context[split.name], costs[split.name] = piece_vectors(
                embedder, conversations, cases, dense, split, count
            )
    finally:
        engram.close()
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    plain = ranker(PROFILES["default"])
    today = with_semantic(cases, dense, None, None)
    dense_rows: list[tuple[str, Ranker]] = [("dense, today's vectors", top_dense(today))]
    full_rows: list[tuple[str, Ranker]] = [
        ("default, HNSW channel (the data dir)", plain),
        ("default, today's vectors (exact cosines)", over(today, plain)),
    ]
    for split in splits:
        for name, scorer in scorers():
            variant = with_semantic(cases, dense, split.name, scorer)
            label = name.replace("pieces", f"pieces ({split.name})")
            dense_rows.append((f"dense, {label}", top_dense(variant)))
            full_rows.append((f"default, {label}", over(variant, plain)))
    results = {name: evaluate(cases, r) for name, r in dense_rows + full_rows}
    cv = leave_one_out(cases, full_rows[1:])
    results["pieces variant, leave one conversation out"] = cv["held_out"]
    for name, result in results.items():
        print(render(name, result), flush=True)
    print(f"chosen per held-out conversation: {cv['chosen']}")
    by_name = dict(full_rows)

    def held_out(case: Case, k: int) -> list[str]:
        return by_name[cv["chosen"][case.conversation]](case, k)

    gains = {name: paired(cases, r, dense_rows[0][1]) for name, r in dense_rows[1:]}
    gains.update({name: paired(cases, r, full_rows[1][1]) for name, r in full_rows[2:]})
    gains["pieces variant, leave one conversation out"] = paired(cases, held_out, full_rows[1][1])
    for name, g in gains.items():
        print(
            f"paired gain R@5 / R@10 {g['overall']} multi-hop {g['1']} openers {g['openers']} | {name}",
            flush=True,
        )
    for name, c in costs.items():
        print(f"cost {name}: {c.as_json()}")
    report = {
        "benchmark": "locomo-pieces",
        "date": now_utc(),
        "machine": machine(),
        "embedding_model": inner.model_id,
        "dataset": {"path": str(args.path), "questions": len(cases)},
        "splits": [s.name for s in splits],
        "cost": {name: c.as_json() for name, c in costs.items()},
        "cross_validation": cv["chosen"],
        "paired": gains,
        "variants": {name: as_json(r) for name, r in results.items()},
    }
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
